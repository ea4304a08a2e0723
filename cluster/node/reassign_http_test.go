package node

import (
	"strings"
	"testing"
)

// The move routes answer the list on the metadata primary, and refuse a
// bad path, a bad body and a drain the metadata refuses, naming why.
func TestHTTPReassignRoutes(t *testing.T) {
	base := runHTTPNode(t)
	cases := []struct {
		method, path, body string
		status             int
		want               []string
	}{
		{"GET", "/v1/reassignments", "", 200, []string{`"moves":[]`, `"drains":[]`}},
		{"GET", "/v1/reassignments?x=1", "", 400, []string{"query parameter", "is unknown"}},
		{"POST", "/v1/nodes/abc/drain", `{}`, 400, []string{"node in the path"}},
		{"POST", "/v1/nodes/1/drain", `{"replace":2}`, 400, []string{"accepted: dry_run, replace_with"}},
		{"POST", "/v1/nodes/9/drain", `{}`, 400, []string{"node 9 is not in the roster"}},
		{"POST", "/v1/nodes/1/drain", `{"dry_run":true}`, 400, []string{"leaves 0 nodes not draining, and topic t keeps 1 copies"}},
		{"POST", "/v1/nodes/1/drain", `{"replace_with":1}`, 400, []string{"cannot replace itself"}},
		{"DELETE", "/v1/nodes/1/drain", "", 400, []string{"node not draining: node 1"}},
	}
	for _, c := range cases {
		code, _, body := httpRaw(t, c.method, base+c.path, c.body, nil)
		ok := code == c.status
		for _, w := range c.want {
			ok = ok && strings.Contains(string(body), w)
		}
		if !ok {
			t.Errorf("%s %s %s: %d %s; want %d with %q", c.method, c.path, c.body, code, body, c.status, c.want)
		}
	}
}
