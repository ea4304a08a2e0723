package node

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/forward"
)

// Two nodes that share the cluster secret but not http.jwt_secret: the
// replication handshake refuses the link and both nodes log which secret
// differs, instead of joining and failing every forwarded HTTP request.
func TestPeerWithAnotherJWTSecretIsRefused(t *testing.T) {
	ports := freePorts(t, 4)
	roster := []config.RosterNode{{ID: 1, ClientAddr: ports[0], ReplicationAddr: ports[1]}, {ID: 2, ClientAddr: ports[2], ReplicationAddr: ports[3]}}
	var logs []*logBuf
	for i, jwt := range []string{"jwt-one", "jwt-two"} {
		cfg := config.Default()
		cfg.Node.ID, cfg.Node.DataDir = i+1, t.TempDir()
		cfg.Node.ClientAddr, cfg.Node.ReplicationAddr = roster[i].ClientAddr, roster[i].ReplicationAddr
		cfg.Node.HTTPAddr, cfg.Node.KafkaAddr = "", ""
		cfg.Shard.Count = 1
		cfg.Cluster.Secret, cfg.Cluster.Nodes = "shared", roster
		cfg.HTTP.JWTSecret = jwt
		lb := &logBuf{}
		n, err := New(cfg, slog.New(slog.NewTextHandler(lb, nil)))
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Start(); err != nil {
			n.Stop(context.Background())
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			n.Stop(ctx)
		})
		logs = append(logs, lb)
	}
	waitFor(t, 20*time.Second, "both nodes to log the refused handshake", func() bool {
		return len(logs[0].lines("replication handshake refused", "http.jwt_secret differs")) > 0 &&
			len(logs[1].lines("replication handshake refused", "http.jwt_secret differs")) > 0
	})
	for i, lb := range logs {
		if got := lb.lines("replication link up"); len(got) > 0 {
			t.Fatalf("node %d brought a link up: %v", i+1, got)
		}
		if got := append(lb.lines("jwt-one"), lb.lines("jwt-two")...); len(got) > 0 {
			t.Fatalf("node %d logged a secret: %v", i+1, got)
		}
	}
}

// A forwarding proof is accepted once: sent again within its 10 s, the
// same signed request is refused as a replay.
func TestForwardedProofReplayRefused(t *testing.T) {
	n := runNode(t, t.TempDir(), func(c *config.Config) {
		c.Node.HTTPAddr = "127.0.0.1:0"
		c.HTTP.JWTSecret = "jwt"
	})
	base := "http://" + n.HTTPAddr()
	body := `{"name":"replayed","partitions":1}`
	proof, err := forward.Sign([]byte("jwt"), forward.Request{Method: "POST", PathQuery: "/v1/topics", Body: []byte(body), From: 2, To: 1}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	hdr := map[string]string{forward.Header: proof}
	if code, _, raw := httpRaw(t, "POST", base+"/v1/topics", body, hdr); code != http.StatusCreated {
		t.Fatalf("first use: %d %s", code, raw)
	}
	code, _, raw := httpRaw(t, "POST", base+"/v1/topics", body, hdr)
	if code != http.StatusUnauthorized || !strings.Contains(string(raw), "replayed") {
		t.Fatalf("replay: %d %s, want 401 naming the replay", code, raw)
	}
}
