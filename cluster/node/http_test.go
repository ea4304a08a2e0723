package node

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/forward"
)

// httpRaw sends body (raw bytes; "" sends none) and returns the answer's
// status, headers and body.
func httpRaw(t testing.TB, method, url, body string, hdr map[string]string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// httpDo sends body as JSON and decodes the JSON answer.
func httpDo(t testing.TB, method, url string, body any, hdr map[string]string) (int, map[string]any) {
	t.Helper()
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	code, _, raw := httpRaw(t, method, url, string(b), hdr)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: %d answered %q, not a JSON object: %v", method, url, code, raw, err)
	}
	return code, out
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

// Every node serves the HTTP API; requests reaching a node that is not
// the primary are forwarded in one hop with a signed proof, and the
// answers, errors included, keep their shape on the way back.
func TestHTTPForwardsToThePrimary(t *testing.T) {
	ports := freePorts(t, 3)
	tc := startCluster(t, 3, func(c *config.Config) {
		c.HTTP.JWTSecret = "jwt"
		for i := range c.Cluster.Nodes {
			c.Cluster.Nodes[i].HTTPAddr = ports[i]
		}
		c.Node.HTTPAddr = ports[c.Node.ID-1]
	})
	base := func(i int) string { return "http://" + tc.nodes[i].HTTPAddr() }
	clusterWait(t, 30*time.Second, "create over HTTP", func() bool {
		code, _ := httpDo(t, "POST", base(2)+"/v1/topics", map[string]any{"name": "web", "partitions": 3, "replication_factor": 3}, nil)
		return code == http.StatusCreated
	})
	// Produce partition 0 through every node: each answer comes from the
	// primary.
	var primary float64
	for i := 0; i < 3; i++ {
		var code int
		var body map[string]any
		clusterWait(t, 20*time.Second, "produce over HTTP", func() bool {
			code, body = httpDo(t, "POST", base(i)+"/v1/topics/web/partitions/0/records",
				map[string]any{"records": []map[string]any{{"key_text": "k", "value_text": fmt.Sprintf("v%d", i)}}}, nil)
			return code == http.StatusOK
		})
		if primary == 0 {
			primary = body["served_by"].(float64)
		} else if body["served_by"].(float64) != primary {
			t.Fatalf("node %d's produce served by %v, primary is %v", i+1, body["served_by"], primary)
		}
	}
	code, body := httpDo(t, "GET", base(0)+"/v1/topics/web/partitions/0/records?offset=0", nil, nil)
	recs, _ := body["records"].([]any)
	if code != http.StatusOK || len(recs) != 3 || body["next_offset"] != body["high_watermark"] {
		t.Fatalf("fetch: %d %v", code, body)
	}
	other := 0
	if int(primary) == 1 {
		other = 1
	}
	// An error the primary answers comes back through the forwarder in
	// the same shape, with the primary named.
	status, hdr, raw := httpRaw(t, "GET", base(other)+"/v1/topics/web/partitions/0/records?offset=1000", "", nil)
	if c, msg, _ := errorOf(t, raw); status != http.StatusRequestedRangeNotSatisfiable || c != "OFFSET_OUT_OF_RANGE" ||
		hdr.Get("X-Corestream-Served-By") != strconv.Itoa(int(primary)) {
		t.Fatalf("forwarded fetch past the end: %d %s %q served by %q", status, c, msg, hdr.Get("X-Corestream-Served-By"))
	}
	// A forged proof is refused; a forwarded request that reaches a
	// non-primary is not forwarded again.
	status, _, raw = httpRaw(t, "GET", base(other)+"/v1/topics/web/partitions/0/records?offset=0", "", map[string]string{forward.Header: "forged"})
	if c, msg, retriable := errorOf(t, raw); status != http.StatusUnauthorized || c != "INVALID_REQUEST" || retriable ||
		!strings.Contains(msg, forward.Header) {
		t.Fatalf("forged proof: %d %s %q", status, c, msg)
	}
	path := "/v1/topics/web/partitions/0/records?offset=0"
	proof, _ := forward.Sign([]byte("jwt"), forward.Request{Method: "GET", PathQuery: path, From: 3, To: int32(other + 1)}, time.Now())
	status, _, raw = httpRaw(t, "GET", base(other)+path, "", map[string]string{forward.Header: proof})
	if c, msg, retriable := errorOf(t, raw); status != http.StatusMisdirectedRequest || c != "NOT_PRIMARY" || !retriable ||
		!strings.Contains(msg, "not forwarded again") {
		t.Fatalf("double forward: %d %s %q", status, c, msg)
	}
	var hinted struct {
		Error struct {
			Hint struct {
				NodeID   int32  `json:"node_id"`
				HTTPAddr string `json:"http_addr"`
			} `json:"hint"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &hinted); hinted.Error.Hint.NodeID != int32(primary) || hinted.Error.Hint.HTTPAddr != ports[int(primary)-1] {
		t.Fatalf("double forward names %+v, primary is %v at %s", hinted.Error.Hint, primary, ports[int(primary)-1])
	}
	// A bad body is refused by the node that received it, in the same
	// shape, without a hop.
	status, hdr, raw = httpRaw(t, "POST", base(other)+"/v1/topics/web/partitions/0/records", `{"records":[{"valu":"aGk="}]}`, nil)
	if c, msg, _ := errorOf(t, raw); status != http.StatusBadRequest || c != "INVALID_REQUEST" || !strings.Contains(msg, `"valu"`) ||
		hdr.Get("X-Corestream-Served-By") != "" {
		t.Fatalf("bad body through a non-primary: %d %s %q", status, c, msg)
	}
	if status, _, raw := httpRaw(t, "GET", base(0)+"/metrics", "", nil); status != http.StatusOK || !bytes.Contains(raw, []byte("corestream_")) {
		t.Fatalf("metrics: %d", status)
	}
}
