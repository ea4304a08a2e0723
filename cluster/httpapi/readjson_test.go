package httpapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// readJSON checks the query before it reads the body, and answers the
// first error itself: an unknown query parameter, then an empty body, an
// unknown field, data after the object. Only a clean request is ok, with
// the body as it came (for a forward).
func TestHTTPReadJSON(t *testing.T) {
	h := &API{bodyTimeout: httpBodyTimeout}
	cases := []struct {
		name, target, body string
		ok                 bool
		msg                string
	}{
		{"ok", "/v1/rebalance", `{"dry_run": true}`, true, ""},
		{"query before body", "/v1/rebalance?x=1", `{"nope": 1}`, false, `query parameter "x" is unknown: this route takes no query parameters`},
		{"empty", "/v1/rebalance", " ", false, "the request body is empty; send a JSON object with the fields dry_run, moves_max"},
		{"unknown field", "/v1/rebalance", `{"nope": 1}`, false, `"nope"`},
		{"trailing", "/v1/rebalance", `{} {}`, false, "the request body has data after its JSON object"},
	}
	for _, c := range cases {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", c.target, strings.NewReader(c.body))
		var in rebalanceBody
		body, ok := h.readJSON(w, r, &in)
		if ok != c.ok {
			t.Fatalf("%s: ok %v, want %v (answer %s)", c.name, ok, c.ok, w.Body.Bytes())
		}
		if ok {
			if string(body) != c.body || !in.DryRun || w.Body.Len() != 0 {
				t.Errorf("%s: body %q, in %+v, answer %q; want the body as sent, decoded, and nothing answered", c.name, body, in, w.Body.Bytes())
			}
			continue
		}
		code, msg, _ := errorOf(t, w.Body.Bytes())
		if w.Code != 400 || code != "INVALID_REQUEST" || !strings.Contains(msg, c.msg) || body != nil {
			t.Errorf("%s: %d %s %q body %q; want 400 INVALID_REQUEST about %q and no body", c.name, w.Code, code, msg, body, c.msg)
		}
	}
}

// Every route that takes a JSON body refuses a query parameter before it
// looks at the body, with the same words.
func TestHTTPBodyRoutesRefuseQuery(t *testing.T) {
	h := serveFake(t, &fakeService{self: 2}, nil)
	for _, path := range []string{"/v1/rebalance", "/v1/topics/t/partitions/0/primary", "/v1/partitions/log", "/v1/topics"} {
		resp, err := http.Post("http://"+h.Addr()+path+"?x=1", "application/json", strings.NewReader(`{"nope": 1}`))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		code, msg, _ := errorOf(t, raw)
		want := `query parameter "x" is unknown: this route takes no query parameters`
		if resp.StatusCode != 400 || code != "INVALID_REQUEST" || msg != want {
			t.Errorf("POST %s?x=1: %d %s %q; want 400 INVALID_REQUEST %q", path, resp.StatusCode, code, msg, want)
		}
	}
}
