package node

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/httpapi"
	"github.com/corestream/corestream/netio/wire"
)

// runHTTPNode starts a single node with the HTTP API on a free port and
// a topic "t" of two partitions, and returns the API's base URL.
func runHTTPNode(t *testing.T) string {
	t.Helper()
	n := runNode(t, t.TempDir(), func(c *config.Config) { c.Node.HTTPAddr = "127.0.0.1:0" })
	base := "http://" + n.HTTPAddr()
	waitFor(t, 20*time.Second, "a topic created over HTTP", func() bool {
		code, _, _ := httpRaw(t, "POST", base+"/v1/topics", `{"name":"t","partitions":2}`, nil)
		return code == http.StatusCreated || code == http.StatusConflict
	})
	waitFor(t, 20*time.Second, "a produce over HTTP", func() bool {
		code, _, _ := httpRaw(t, "POST", base+"/v1/topics/t/partitions/0/records", `{"records":[{"value_text":"first"}]}`, nil)
		return code == http.StatusOK
	})
	return base
}

// Every bad input is refused with its own status, wire code and a
// message that names what was wrong; nothing is read as a default.
func TestHTTPStrictParsing(t *testing.T) {
	base := runHTTPNode(t)
	recs := "/v1/topics/t/partitions/0/records"
	tooBig := `{"records":[{"value":"` + strings.Repeat("A", httpapi.BodyBytesMax) + `"}]}`
	cases := []struct {
		method, path, body string
		status             int
		code               string
		msg                []string // substrings of the message
		allow              string
	}{
		// Fetch query parameters.
		{"GET", recs + "?offset=abc", "", 400, "INVALID_REQUEST", []string{`"offset"`, `"abc"`, "0..9223372036854775807"}, ""},
		{"GET", recs + "?offset=-1", "", 400, "INVALID_REQUEST", []string{`"offset"`, `"-1"`}, ""},
		{"GET", recs + "?offset=1e3", "", 400, "INVALID_REQUEST", []string{`"offset"`}, ""},
		{"GET", recs + "?offset=+5", "", 400, "INVALID_REQUEST", []string{`"offset"`}, ""},
		{"GET", recs + "?offset=", "", 400, "INVALID_REQUEST", []string{`"offset"`}, ""},
		{"GET", recs + "?offset=1&offset=2", "", 400, "INVALID_REQUEST", []string{`"offset"`, "2 times"}, ""},
		{"GET", recs + "?ofset=1", "", 400, "INVALID_REQUEST", []string{`"ofset"`, "offset, max_bytes, max_wait_ms"}, ""},
		{"GET", recs + "?max_bytes=0", "", 400, "INVALID_REQUEST", []string{`"max_bytes"`, "1..16777216"}, ""},
		{"GET", recs + "?max_bytes=99999999999", "", 400, "INVALID_REQUEST", []string{`"max_bytes"`}, ""},
		{"GET", recs + "?max_wait_ms=60001", "", 400, "INVALID_REQUEST", []string{`"max_wait_ms"`, "0..60000"}, ""},
		{"GET", recs + "?offset=1000000", "", 416, "OFFSET_OUT_OF_RANGE", nil, ""},
		// Paths.
		{"GET", "/v1/topics/t/partitions/abc/records", "", 400, "INVALID_REQUEST", []string{"partition", `"abc"`}, ""},
		{"GET", "/v1/topics/t/partitions/-1/records", "", 400, "INVALID_REQUEST", []string{"partition", `"-1"`}, ""},
		{"GET", "/v1/topics/t/partitions/2/records", "", 404, "UNKNOWN_TOPIC_OR_PARTITION", []string{"0..1"}, ""},
		{"GET", "/v1/topics/nope/partitions/0/records", "", 404, "UNKNOWN_TOPIC_OR_PARTITION", []string{`"nope"`}, ""},
		{"GET", "/v1/topics/nope", "", 404, "UNKNOWN_TOPIC_OR_PARTITION", []string{`"nope"`}, ""},
		{"GET", "/v1/topics/a%20b", "", 400, "INVALID_TOPIC_NAME", nil, ""},
		{"DELETE", "/v1/topics/nope", "", 404, "UNKNOWN_TOPIC_OR_PARTITION", nil, ""},
		// Produce query and body.
		{"POST", recs + "?acks=bogus", `{"records":[{"value_text":"x"}]}`, 400, "INVALID_REQUEST", []string{`"acks"`, `"bogus"`, "quorum, primary"}, ""},
		{"POST", recs, "", 400, "INVALID_REQUEST", []string{"empty", "records"}, ""},
		{"POST", recs, `[]`, 400, "INVALID_REQUEST", []string{"array", "records"}, ""},
		{"POST", recs, `{"records":[]}`, 400, "INVALID_REQUEST", []string{`"records"`, "1..10000"}, ""},
		{"POST", recs, `{"records":[{"value":"%%%"}]}`, 400, "INVALID_REQUEST", []string{"records[0].value", "base64", "value_text"}, ""},
		{"POST", recs, `{"records":[{"value_text":"a"},{"value":"aGk=","value_text":"hi"}]}`, 400, "INVALID_REQUEST", []string{"records[1].value", "both"}, ""},
		{"POST", recs, `{"records":[{"valu":"aGk="}]}`, 400, "INVALID_REQUEST", []string{`"valu"`, "records[].value_text"}, ""},
		{"POST", recs, `{"records":[{"value":5}]}`, 400, "INVALID_REQUEST", []string{"records.value", "number", "a string"}, ""},
		{"POST", recs, `{"records":[{"value":"aGk="}]} x`, 400, "INVALID_REQUEST", []string{"after"}, ""},
		{"POST", recs, `{"records":[{"value":"aGk="}`, 400, "INVALID_REQUEST", []string{"ends inside"}, ""},
		{"POST", recs, `{"records":[{"value_text":"x","timestamp":-1}]}`, 400, "INVALID_TIMESTAMP", []string{"records[0].timestamp"}, ""},
		{"POST", recs, `{"records":[{"value_text":"x","headers":[{"value_text":"v"}]}]}`, 400, "INVALID_REQUEST", []string{"records[0].headers[0].key"}, ""},
		{"POST", recs, tooBig, 413, "MESSAGE_TOO_LARGE", []string{"16777216"}, ""},
		// Topic creation.
		{"POST", "/v1/topics", `{"name":"x"}`, 400, "INVALID_PARTITIONS", []string{`"partitions"`, "missing"}, ""},
		{"POST", "/v1/topics", `{"name":"x","partitions":0}`, 400, "INVALID_PARTITIONS", []string{"1..16384"}, ""},
		{"POST", "/v1/topics", `{"name":"x","partitions":99999999999}`, 400, "INVALID_PARTITIONS", []string{"99999999999"}, ""},
		{"POST", "/v1/topics", `{"name":"x","partitions":1.5}`, 400, "INVALID_REQUEST", []string{`"partitions"`, "integer"}, ""},
		{"POST", "/v1/topics", `{"name":"x","partitions":1,"replication_factor":40}`, 400, "INVALID_REPLICATION_FACTOR", []string{"40"}, ""},
		{"POST", "/v1/topics", `{"name":"x","partitions":1,"config":{"retention_ms":true}}`, 400, "INVALID_CONFIG", []string{"config.retention_ms"}, ""},
		{"POST", "/v1/topics", `{"name":"x","partitions":1,"config":{"bogus":"1"}}`, 400, "INVALID_CONFIG", []string{`"bogus"`}, ""},
		{"POST", "/v1/topics", `{"name":"a b","partitions":1}`, 400, "INVALID_TOPIC_NAME", nil, ""},
		{"POST", "/v1/topics", `{"name":"x","partitions":1,"extra":1}`, 400, "INVALID_REQUEST", []string{`"extra"`, "name, partitions, replication_factor, config"}, ""},
		{"POST", "/v1/topics", `{"name":"t","partitions":1}`, 409, "TOPIC_ALREADY_EXISTS", nil, ""},
		// Routes and methods.
		{"GET", "/v1/nope", "", 404, "INVALID_REQUEST", []string{"no route", "/v1/nope"}, ""},
		{"POST", "/", "", 405, "INVALID_REQUEST", nil, "GET, HEAD"}, // GET / is the console
		{"PUT", "/v1/topics", "", 405, "INVALID_REQUEST", []string{"PUT"}, "GET, POST, HEAD"},
		{"DELETE", recs, "", 405, "INVALID_REQUEST", []string{"DELETE"}, "GET, POST, HEAD"},
		{"POST", "/v1/health", "", 405, "INVALID_REQUEST", nil, "GET, HEAD"},
		{"GET", "/v1/health?verbose=1", "", 400, "INVALID_REQUEST", []string{`"verbose"`, "no query parameters"}, ""},
		{"GET", "/v1/topics?x=1", "", 400, "INVALID_REQUEST", []string{`"x"`}, ""},
	}
	for _, c := range cases {
		name := c.method + " " + c.path
		if len(name) > 80 {
			name = name[:80]
		}
		status, hdr, raw := httpRaw(t, c.method, base+c.path, c.body, nil)
		if hdr.Get("Content-Type") != "application/json" {
			t.Errorf("%s: Content-Type %q", name, hdr.Get("Content-Type"))
		}
		code, msg, retriable := errorOf(t, raw)
		if status != c.status || code != c.code {
			t.Errorf("%s %.60s: %d %s %q, want %d %s", name, c.body, status, code, msg, c.status, c.code)
			continue
		}
		for _, s := range c.msg {
			if !strings.Contains(msg, s) {
				t.Errorf("%s %.60s: message %q does not say %q", name, c.body, msg, s)
			}
		}
		if e := wireErrorNamed(code); e == nil || retriable != e.Retriable {
			t.Errorf("%s: retriable %v for %s", name, retriable, code)
		}
		if hdr.Get("Allow") != c.allow {
			t.Errorf("%s: Allow %q, want %q", name, hdr.Get("Allow"), c.allow)
		}
	}
	// Nothing above was written: partition 0 holds only the setup's record.
	var f fetchAnswer
	status, _, raw := httpRaw(t, "GET", base+recs+"?offset=0", "", nil)
	if err := json.Unmarshal(raw, &f); status != 200 || err != nil || len(f.Records) != 1 {
		t.Fatalf("after the bad requests: %d %s", status, raw)
	}
	// The valid forms of what was refused are accepted.
	for _, ok := range []struct{ method, path, body string }{
		{"POST", "/v1/topics", `{"name":"cfg","partitions":1,"config":{"retention_ms":60000,"retention_bytes":"1048576"}}`},
		{"POST", recs + "?acks=primary", `{"records":[{"value_text":"x","timestamp":0,"headers":[{"key_text":"h","value":null}]}]}`},
		{"GET", recs + "?offset=0&max_bytes=1&max_wait_ms=0", ""},
		{"DELETE", "/v1/topics/cfg", ""},
	} {
		if status, _, raw := httpRaw(t, ok.method, base+ok.path, ok.body, nil); status/100 != 2 {
			t.Errorf("%s %s %s: %d %s", ok.method, ok.path, ok.body, status, raw)
		}
	}
}

// fetchAnswer and produceAnswer are the records answers as a client
// reads them.
type fetchAnswer struct {
	Records []json.RawMessage `json:"records"`
}

type produceAnswer struct {
	BaseOffset  int64 `json:"base_offset"`
	LastOffset  int64 `json:"last_offset"`
	RecordCount int   `json:"record_count"`
}

func wireErrorNamed(name string) *wire.Error {
	for _, e := range wire.Errors() {
		if e.Name == name {
			return e
		}
	}
	return nil
}

// Keys, values and headers carry every byte value both ways; null and
// empty stay distinct; offsets and next_offset are always present.
func TestHTTPBinaryRoundTrip(t *testing.T) {
	base := runHTTPNode(t)
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	b64 := base64.StdEncoding.EncodeToString(all)
	body := fmt.Sprintf(`{"records":[
		{"key":%q,"value":%q,"headers":[{"key":%q,"value":%q},{"key":%q,"value":null}]},
		{"key":null,"value":""},
		{"key_text":"clé","value_text":"h\u00e9llo \u0000 \ud83d\ude00"}]}`, b64, b64, b64, b64, b64)
	status, _, raw := httpRaw(t, "POST", base+"/v1/topics/t/partitions/1/records", body, nil)
	var pa produceAnswer
	if err := json.Unmarshal(raw, &pa); status != 200 || err != nil || pa.RecordCount != 3 || pa.LastOffset != pa.BaseOffset+2 {
		t.Fatalf("produce: %d %s", status, raw)
	}
	status, _, raw = httpRaw(t, "GET", fmt.Sprintf("%s/v1/topics/t/partitions/1/records?offset=%d", base, pa.BaseOffset), "", nil)
	var fa struct {
		Records []struct {
			Offset  *int64  `json:"offset"`
			Key     *string `json:"key"`
			Value   *string `json:"value"`
			Headers []struct {
				Key   string  `json:"key"`
				Value *string `json:"value"`
			} `json:"headers"`
		} `json:"records"`
		NextOffset    *int64 `json:"next_offset"`
		HighWatermark *int64 `json:"high_watermark"`
	}
	if err := json.Unmarshal(raw, &fa); status != 200 || err != nil || len(fa.Records) != 3 {
		t.Fatalf("fetch: %d %s", status, raw)
	}
	dec := func(s *string) []byte {
		if s == nil {
			return nil
		}
		b, err := base64.StdEncoding.DecodeString(*s)
		if err != nil {
			t.Fatalf("fetch answered %q, not base64: %v", *s, err)
		}
		return b
	}
	r0, r1, r2 := fa.Records[0], fa.Records[1], fa.Records[2]
	if string(dec(r0.Key)) != string(all) || string(dec(r0.Value)) != string(all) || len(r0.Headers) != 2 ||
		string(dec(&r0.Headers[0].Key)) != string(all) || string(dec(r0.Headers[0].Value)) != string(all) ||
		string(dec(&r0.Headers[1].Key)) != string(all) || r0.Headers[1].Value != nil {
		t.Fatalf("the 256 byte values did not survive: %s", raw)
	}
	if r1.Key != nil || r1.Value == nil || *r1.Value != "" || r1.Headers == nil {
		t.Fatalf("null key / empty value / no headers: %+v in %s", r1, raw)
	}
	if string(dec(r2.Key)) != "clé" || string(dec(r2.Value)) != "h\u00e9llo \x00 \U0001F600" {
		t.Fatalf("text fields: %q %q", dec(r2.Key), dec(r2.Value))
	}
	for i, r := range fa.Records {
		if r.Offset == nil || *r.Offset != pa.BaseOffset+int64(i) {
			t.Fatalf("record %d: offset %v, want %d", i, r.Offset, pa.BaseOffset+int64(i))
		}
	}
	if fa.NextOffset == nil || *fa.NextOffset != pa.LastOffset+1 || fa.HighWatermark == nil || *fa.HighWatermark != pa.LastOffset+1 {
		t.Fatalf("next_offset %v, high_watermark %v; want both %d", fa.NextOffset, fa.HighWatermark, pa.LastOffset+1)
	}
}

// A client that stops in the middle of a body is answered 408 once the
// body timeout passes, instead of holding its connection for ever.
func TestHTTPHalfSentBodyTimesOut(t *testing.T) {
	n := runNode(t, t.TempDir(), nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 300 * time.Millisecond
	cfg := n.httpConfig()
	cfg.BodyTimeout = timeout
	h := httpapi.New(cfg, ln)
	h.Serve()
	t.Cleanup(func() { h.Close() })
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if _, err := io.WriteString(c, "POST /v1/topics HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"name\":"); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second)) // generous: a loaded machine
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a half-sent body after %v: %v", time.Since(start), err)
	}
	raw, _ := io.ReadAll(resp.Body)
	if code, msg, retriable := errorOf(t, raw); resp.StatusCode != http.StatusRequestTimeout || code != "REQUEST_TIMED_OUT" || !retriable ||
		!strings.Contains(msg, timeout.String()) {
		t.Fatalf("half-sent body: %d %s %q", resp.StatusCode, code, msg)
	}
	if el := time.Since(start); el < timeout {
		t.Fatalf("answered after %v, before the %v timeout", el, timeout)
	}
}
