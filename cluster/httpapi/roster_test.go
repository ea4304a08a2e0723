package httpapi

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/shard"
)

// rosterFake records the roster calls and answers a fixed roster.
type rosterFake struct {
	fakeService
	got []service.RosterRequest
}

func (f *rosterFake) ChangeRoster(_ *shard.Shard, req *service.RosterRequest, done func(service.RosterResult, error)) {
	f.got = append(f.got, *req)
	done(service.RosterResult{Members: []service.RosterMember{{ID: 1, ClientAddr: "h:1", ReplicationAddr: "h:2", State: "active"}}}, nil)
}

// The roster routes pass what they are given to the service, and refuse
// an id outside 1..32 or an add without its addresses before calling it.
func TestHTTPRosterRoutes(t *testing.T) {
	f := &rosterFake{fakeService: fakeService{self: 1}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := New(Config{Service: f, Self: 1, HTTPAddrOf: func(int32) string { return "" }}, ln)
	h.Serve()
	t.Cleanup(func() { h.Close() })
	base := "http://" + h.Addr() + "/v1/cluster/nodes"
	do := func(method, url, body string) (int, string) {
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, string(b)
	}
	cases := []struct {
		method, url, body string
		status            int
		want              string
	}{
		{"GET", base, "", 200, `"state":"active"`},
		{"POST", base, `{"node_id": 4, "client_addr": "h:7", "replication_addr": "h:8", "rack": "b"}`, 200, `"node_id":1`},
		{"DELETE", base + "/4", "", 200, `"nodes"`},
		{"DELETE", base + "/40", "", 400, "not a number in 1..32"},
		{"POST", base, `{"node_id": 4, "client_addr": "h:7"}`, 400, "replication_addr"},
		{"POST", base, `{"node_id": 0, "client_addr": "h:7", "replication_addr": "h:8"}`, 400, "1..32"},
	}
	for _, c := range cases {
		status, body := do(c.method, c.url, c.body)
		if status != c.status || !strings.Contains(body, c.want) {
			t.Errorf("%s %s: %d %s, want %d with %q", c.method, c.url, status, body, c.status, c.want)
		}
	}
	want := []service.RosterRequest{
		{Action: service.RosterList},
		{Action: service.RosterAdd, Member: service.RosterMember{ID: 4, ClientAddr: "h:7", ReplicationAddr: "h:8", Rack: "b"}},
		{Action: service.RosterRemove, Member: service.RosterMember{ID: 4}},
	}
	g, _ := json.Marshal(f.got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Fatalf("the service was asked\n%s\nwant\n%s", g, w)
	}
}
