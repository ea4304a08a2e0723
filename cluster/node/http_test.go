package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/forward"
)

func httpDo(t *testing.T, method, url string, body any, hdr map[string]string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
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
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// Every node serves the HTTP API; requests reaching a node that is not
// the primary are forwarded in one hop with a signed proof.
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
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := httpDo(t, "POST", base(2)+"/v1/topics", map[string]any{"name": "web", "partitions": 3, "replication_factor": 3}, nil)
		if code == http.StatusCreated {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("create: %d %v", code, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Produce partition 0 through every node: each answer comes from the
	// primary.
	var primary float64
	for i := 0; i < 3; i++ {
		var code int
		var body map[string]any
		clusterWait(t, 20*time.Second, "produce over HTTP", func() bool {
			code, body = httpDo(t, "POST", base(i)+"/v1/topics/web/partitions/0/records",
				map[string]any{"records": []map[string]any{{"key": "k", "value": fmt.Sprintf("v%d", i)}}}, nil)
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
	if code != http.StatusOK || len(recs) != 3 {
		t.Fatalf("fetch: %d %v", code, body)
	}
	// A forged proof is refused; a forwarded request that reaches a
	// non-primary is not forwarded again.
	other := 0
	if int(primary) == 1 {
		other = 1
	}
	code, _ = httpDo(t, "GET", base(other)+"/v1/topics/web/partitions/0/records?offset=0", nil, map[string]string{forward.Header: "forged"})
	if code != http.StatusUnauthorized {
		t.Fatalf("forged proof: %d", code)
	}
	path := "/v1/topics/web/partitions/0/records?offset=0"
	proof, _ := forward.Sign([]byte("jwt"), forward.Request{Method: "GET", PathQuery: path, From: 3, To: int32(other + 1)}, time.Now())
	code, body = httpDo(t, "GET", base(other)+path, nil, map[string]string{forward.Header: proof})
	if code != http.StatusMisdirectedRequest || !strings.Contains(fmt.Sprint(body["message"]), "not forwarded again") {
		t.Fatalf("double forward: %d %v", code, body)
	}
	code, body = httpDo(t, "GET", base(0)+"/metrics", nil, nil)
	_ = body
	if code != http.StatusOK {
		t.Fatalf("metrics: %d", code)
	}
	_ = context.Background
}
