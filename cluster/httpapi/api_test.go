package httpapi

import (
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/segment/batch"
)

func mkBatch(t testing.TB, values ...string) []byte {
	t.Helper()
	b, err := batch.NewBuilder(batch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if err := b.AppendKV(time.Now().UnixMilli(), nil, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// deadAddr is a loopback address nothing listens on (bound, then closed).
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// errorOf is the error object of an error answer; it fails the test when
// the answer does not have the documented shape.
func errorOf(t testing.TB, raw []byte) (code, message string, retriable bool) {
	t.Helper()
	var body struct {
		Error *struct {
			Code      *string `json:"code"`
			Message   *string `json:"message"`
			Retriable *bool   `json:"retriable"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &body); err != nil || body.Error == nil || body.Error.Code == nil ||
		body.Error.Message == nil || body.Error.Retriable == nil {
		t.Fatalf("answer %q is not {\"error\": {\"code\", \"message\", \"retriable\"}} (%v)", raw, err)
	}
	return *body.Error.Code, *body.Error.Message, *body.Error.Retriable
}

// decodeRecords keeps offset 0, skips records before the one asked for,
// and moves next_offset past every batch; a corrupt batch is an error,
// not silently skipped.
func TestHTTPDecodeRecords(t *testing.T) {
	a, b := mkBatch(t, "a", "b", "c"), mkBatch(t, "d")
	batch.SetBaseOffset(b, 3)
	data := append(append([]byte{}, a...), b...)
	cases := []struct {
		from     int64
		data     []byte
		offsets  []int64
		next     int64
		corrupt  bool
		rawMatch string
	}{
		{0, data, []int64{0, 1, 2, 3}, 4, false, `{"offset":0,`},
		{1, data, []int64{1, 2, 3}, 4, false, `{"offset":1,`},
		{7, nil, nil, 7, false, `[]`},
		{0, data[:len(a)+10], []int64{0, 1, 2}, 3, false, ""}, // a partial tail batch: next is where it starts
	}
	for _, c := range cases {
		recs, next, err := decodeRecords(c.data, c.from)
		if err != nil || next != c.next || len(recs) != len(c.offsets) {
			t.Fatalf("from %d: %d records, next %d, %v; want %v, %d", c.from, len(recs), next, err, c.offsets, c.next)
		}
		for i, r := range recs {
			if r.Offset != c.offsets[i] {
				t.Fatalf("from %d: record %d at %d, want %d", c.from, i, r.Offset, c.offsets[i])
			}
		}
		raw, _ := json.Marshal(recs)
		if !strings.Contains(string(raw), c.rawMatch) {
			t.Fatalf("from %d: %s does not contain %s", c.from, raw, c.rawMatch)
		}
	}
	bad := append([]byte{}, data...)
	bad[len(a)-1] ^= 0xff // a record byte of the first batch: its CRC fails
	if _, _, err := decodeRecords(bad, 0); !errors.Is(err, wire.ErrCorruptMessage) {
		t.Fatalf("a corrupt batch: %v", err)
	}
}

// The query parsers are pure: each parameter's bounds and defaults.
func TestHTTPParseQuery(t *testing.T) {
	q := func(s string) url.Values {
		v, err := url.ParseQuery(s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	fetches := []struct {
		query string
		want  fetchParams
		bad   string // a substring of the error, "" when valid
	}{
		{"", fetchParams{offset: 0, maxBytes: httpFetchBytesDefault, maxWaitMs: 0}, ""},
		{"offset=9223372036854775807&max_bytes=16777216&max_wait_ms=60000", fetchParams{1<<63 - 1, wire.RecordsBytesMax, wire.FetchWaitMsMax}, ""},
		{"offset=9223372036854775808", fetchParams{}, `"offset"`},
		{"offset= 1", fetchParams{}, `"offset"`},
		{"offset=0x10", fetchParams{}, `"offset"`},
		{"max_bytes=16777217", fetchParams{}, `"max_bytes"`},
		{"max_wait_ms=-1", fetchParams{}, `"max_wait_ms"`},
		{"acks=quorum", fetchParams{}, `"acks" is unknown`},
	}
	for _, c := range fetches {
		got, err := parseFetchQuery(q(c.query))
		switch {
		case c.bad == "" && (err != nil || got != c.want):
			t.Errorf("fetch %q: %+v %v, want %+v", c.query, got, err, c.want)
		case c.bad != "" && (err == nil || !strings.Contains(err.Error(), c.bad) || !errors.Is(err, wire.ErrInvalidRequest)):
			t.Errorf("fetch %q: %v, want INVALID_REQUEST about %s", c.query, err, c.bad)
		}
	}
	produces := []struct {
		query string
		acks  service.Acks
		bad   bool
	}{
		{"", service.AcksQuorum, false},
		{"acks=quorum", service.AcksQuorum, false},
		{"acks=primary", service.AcksPrimary, false},
		{"acks=bogus", 0, true},
		{"acks=", 0, true},
		{"acks=Primary", 0, true},
		{"acks=primary&acks=primary", 0, true},
		{"offset=1", 0, true},
	}
	for _, c := range produces {
		got, err := parseProduceQuery(q(c.query))
		if (err != nil) != c.bad || (!c.bad && got.acks != c.acks) {
			t.Errorf("produce %q: %+v %v", c.query, got, err)
		}
	}
}

// Where a request cannot be forwarded, the answer says where to send it,
// in the error shape: no primary (503), no secret to sign with (421 with
// the primary's HTTP address), a primary that does not answer (502).
func TestHTTPRouteRefusals(t *testing.T) {
	dead := deadAddr(t)
	addrs := map[int32]string{1: "127.0.0.1:1", 2: dead}
	h := &API{self: 1, httpAddrs: func(id int32) string { return addrs[id] }, client: &http.Client{Timeout: 10 * time.Second}}
	cases := []struct {
		name    string
		secret  string
		target  int32
		notHere *wire.Error
		status  int
		code    string
		msg     string
		hintTo  string
	}{
		{"no primary", "jwt", -1, wire.ErrNotPrimary, 503, "PRIMARY_NOT_AVAILABLE", "partition's primary", ""},
		{"no metadata primary", "jwt", -1, wire.ErrNotMetadataPrimary, 503, "PRIMARY_NOT_AVAILABLE", "metadata primary", ""},
		{"no secret", "", 2, wire.ErrNotPrimary, 421, "NOT_PRIMARY", "http.jwt_secret", dead},
		{"no secret, metadata", "", 2, wire.ErrNotMetadataPrimary, 421, "NOT_METADATA_PRIMARY", "http.jwt_secret", dead},
		{"no http_addr", "jwt", 3, wire.ErrNotPrimary, 421, "NOT_PRIMARY", "no http_addr", ""},
		{"primary down", "jwt", 2, wire.ErrNotPrimary, 502, "NODE_NOT_AVAILABLE", dead, dead},
	}
	for _, c := range cases {
		h.jwtSecret = c.secret
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/v1/topics/t/partitions/0/records", nil)
		if h.route(w, r, nil, c.target, c.notHere) {
			t.Fatalf("%s: served here", c.name)
		}
		code, msg, _ := errorOf(t, w.Body.Bytes())
		var hinted struct {
			Error struct {
				Hint *struct {
					HTTPAddr string `json:"http_addr"`
				} `json:"hint"`
			} `json:"error"`
		}
		json.Unmarshal(w.Body.Bytes(), &hinted)
		hintTo := ""
		if hinted.Error.Hint != nil {
			hintTo = hinted.Error.Hint.HTTPAddr
		}
		if w.Code != c.status || code != c.code || !strings.Contains(msg, c.msg) || hintTo != c.hintTo {
			t.Errorf("%s: %d %s %q hint %q, want %d %s about %q hint %q", c.name, w.Code, code, msg, hintTo, c.status, c.code, c.msg, c.hintTo)
		}
	}
}
