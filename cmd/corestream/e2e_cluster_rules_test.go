package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/cluster/node"
	"github.com/corestream/corestream/cluster/peerauth"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/tools/localcluster/launch"
)

// TestE2EClusterRefusesMismatchedPeers starts node 3 of three with
// another cluster secret, then with another K
// (replica_connections_per_peer): each time both sides log the refusal
// with both values, node 3 never counts as alive, and nodes 1 and 2 serve
// on. A peer claiming another server version is refused too (a hand-made
// handshake, since the version is compiled in). Node 3 with the right
// configuration then joins.
func TestE2EClusterRefusesMismatchedPeers(t *testing.T) {
	c := startCluster(t, clusterOpts{nodes: 3, noWait: true, mutate: func(p *launch.Plan) {
		p.Nodes[2].Secret = "another-secret"
	}})
	refused := func(what string, n *server, subs ...string) {
		t.Helper()
		waitUntil(t, clusterWaitTimeout, what, func() (bool, string) {
			lines := n.stderr.lines(append([]string{"replication handshake refused"}, subs...)...)
			if len(lines) == 0 {
				return false, "no such log line yet"
			}
			t.Logf("%s: %s", what, lines[0])
			return true, ""
		})
	}
	notJoined := func() {
		t.Helper()
		waitUntil(t, clusterWaitTimeout, "nodes 1 and 2 serving without node 3", func() (bool, string) {
			st, err := c.status(1)
			if err != nil {
				return false, err.Error()
			}
			alive := map[int32]bool{}
			for _, n := range st.Nodes {
				alive[n.ID] = n.Alive
			}
			return st.MetadataPrimaryID > 0 && alive[1] && alive[2] && !alive[3], fmt.Sprintf("%+v", st)
		})
	}

	refused("node 3 refuses nodes 1 and 2 (another secret)", c.node(3), "secret")
	refused("node 1 refuses node 3 (another secret)", c.node(1), "secret")
	notJoined()

	c.kill(3)
	c.plan.Nodes[2].Secret, c.plan.Nodes[2].K = c.plan.Options.Secret, 2
	c.restart(3)
	refused("node 3 refuses nodes 1 and 2 (another K)", c.node(3), "replica_connections_per_peer is 2 here, 1 on node")
	refused("node 1 refuses node 3 (another K)", c.node(1), "replica_connections_per_peer is 1 here, 2 on node 3")
	notJoined()

	reason := helloWithVersion(t, c.plan.Nodes[0].ReplicationAddr, c.plan.Options.Secret, "0.0.0-other")
	if !errors.Is(reason, peerauth.ErrRefused) || !strings.Contains(reason.Error(), fmt.Sprintf("server version %q here, %q on node 2", node.Version, "0.0.0-other")) {
		t.Fatalf("a peer with another server version: %v", reason)
	}
	t.Logf("a peer with another server version is answered: %v", reason)
	refused("node 1 logs the refused version", c.node(1), "0.0.0-other")

	c.kill(3)
	c.plan.Nodes[2].K = c.plan.Options.K
	c.restart(3)
	c.waitFormed()
	cl := c.dial(client.Config{})
	createTopic(t, cl, client.TopicSpec{Name: "joined", Partitions: 3, ReplicationFactor: 3})
}

// helloWithVersion dials a node's replication port as node 2 claiming
// server version version, and returns the node's answer as an error (a
// refusal wraps peerauth.ErrRefused).
func helloWithVersion(t *testing.T, addr, secret, version string) error {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	body := peerauth.EncodeHello(peerauth.Hello{Params: peerauth.Params{Version: version, Node: 2, K: 1}, Nonce: peerauth.NewNonce()})
	if _, err := conn.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		t.Fatalf("reading the answer to a Hello: %v", err)
	}
	answer := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(r, answer); err != nil {
		t.Fatal(err)
	}
	kind, _, err := peerauth.Decode(answer)
	if err == nil {
		return fmt.Errorf("answered with message kind %d, not a refusal", kind)
	}
	return err
}

// TestE2EClusterTopicRules checks creation bounds and topic identity on a
// cluster of three processes: a replication factor of 0, 33 or more than
// the roster is refused (by the CLI, the broker, and at start-up for the
// default); a topic deleted and created again under the same name refuses
// requests routed with the old id on every node.
func TestE2EClusterTopicRules(t *testing.T) {
	c := startCluster(t, clusterOpts{nodes: 3})

	t.Run("replication factor bounds", func(t *testing.T) {
		for _, tc := range []struct {
			rf   string
			code int
			want string
		}{
			{"0", exitUsage, "--replication-factor"},
			{"33", exitError, "INVALID_REPLICATION_FACTOR"},
			{"4", exitError, "INVALID_REPLICATION_FACTOR"},
		} {
			code, _, errs := c.cli("", "topic", "create", "rf"+tc.rf, "--partitions", "2", "--replication-factor", tc.rf)
			if code != tc.code || !strings.Contains(errs, tc.want) {
				t.Errorf("factor %s: exit %d, %q; want exit %d naming %s", tc.rf, code, errs, tc.code, tc.want)
			}
			t.Logf("factor %s: exit %d: %s", tc.rf, code, strings.TrimSpace(errs))
		}
		if out := c.cliOK("", "topic", "list"); strings.Contains(out, "rf") {
			t.Fatalf("a refused topic is listed:\n%s", out)
		}
		c.cliOK("", "topic", "create", "rf3", "--partitions", "2", "--replication-factor", "3")
		// The default factor is checked when a node starts.
		for _, rf := range []string{"0", "33", "4"} {
			plan := *c.plan
			plan.Options.ReplicationFactor = rf
			path := filepath.Join(t.TempDir(), "corestream.toml")
			if err := os.WriteFile(path, []byte(plan.TOML(0)), 0o644); err != nil {
				t.Fatal(err)
			}
			code, out, errs := runBin(t, "", "serve", "--config", path, "--data", t.TempDir())
			if code != exitError || strings.Contains(out, "serving") || !strings.Contains(errs, "cluster.default_replication_factor") {
				t.Errorf("serve with default_replication_factor %s: exit %d\n%s%s", rf, code, out, errs)
			}
			t.Logf("serve with default_replication_factor %s: exit %d: %s", rf, code, strings.TrimSpace(errs))
		}
	})

	t.Run("recreated topic refuses the old id", func(t *testing.T) {
		cl := c.dial(client.Config{})
		oldID := createTopic(t, cl, client.TopicSpec{Name: "events", Partitions: 3, ReplicationFactor: 3})
		c.cliOK("old-1\nold-2\nold-3\n", "produce", "events")
		c.cliOK("", "topic", "delete", "events")
		newID := createTopic(t, cl, client.TopicSpec{Name: "events", Partitions: 3, ReplicationFactor: 3})
		if newID == oldID {
			t.Fatalf("the recreated topic has the old id %s", oldID)
		}
		routes := topicRoutes(t, cl, "events")
		for p := int32(0); p < 3; p++ {
			waitUntil(t, clusterWaitTimeout, fmt.Sprintf("events/%d routable", p), func() (bool, string) {
				routes = topicRoutes(t, cl, "events")
				return routes[p].PrimaryID > 0, fmt.Sprintf("%+v", routes[p])
			})
			// Every node holds a copy: each must refuse the old id, and
			// the primary accept the new one.
			for _, n := range c.plan.Nodes {
				ref := wire.PartitionRef{Topic: "events", TopicID: oldID, Partition: p, Generation: wire.GenerationUnknown}
				err := askNode(t, n.ClientAddr, &wire.ProduceRequest{PartitionRef: ref, Acks: wire.AcksQuorum, TimeoutMs: 10000,
					Records: oneRecordBatch([]byte("routed with the old id"))}, &wire.ProduceResponse{})
				if !errors.Is(err, wire.ErrUnknownTopicOrPartition) || !strings.Contains(err.Error(), "deleted and created again") {
					t.Fatalf("node %d: produce to events/%d with the old id: %v", n.ID, p, err)
				}
				err = askNode(t, n.ClientAddr, &wire.FetchRequest{PartitionRef: ref, FetchOffset: 0, MaxBytes: 1 << 20}, &wire.FetchResponse{})
				if !errors.Is(err, wire.ErrUnknownTopicOrPartition) {
					t.Fatalf("node %d: fetch from events/%d with the old id: %v", n.ID, p, err)
				}
			}
			ref := wire.PartitionRef{Topic: "events", TopicID: newID, Partition: p, Generation: wire.GenerationUnknown}
			if err := askNode(t, c.plan.Nodes[routes[p].PrimaryID-1].ClientAddr, &wire.ProduceRequest{PartitionRef: ref, Acks: wire.AcksQuorum,
				TimeoutMs: 10000, Records: oneRecordBatch([]byte(fmt.Sprintf("new-%d", p)))}, &wire.ProduceResponse{}); err != nil {
				t.Fatalf("produce to events/%d with the new id at its primary: %v", p, err)
			}
		}
		out := c.cliOK("", "consume", "events")
		if strings.Contains(out, "old") || strings.Count(out, "new-") != 3 {
			t.Fatalf("the recreated topic reads back:\n%s", out)
		}
		// The old history's files are gone from every node.
		for _, n := range c.plan.Nodes {
			old := filepath.Join(n.DataDir, "partitions", fmt.Sprintf("%x-*", oldID[:]))
			eventually(t, clusterWaitTimeout, "node "+fmt.Sprint(n.ID)+" removing "+old, func() bool {
				m, _ := filepath.Glob(old)
				return len(m) == 0
			})
		}
	})
}

// askNode sends one request to the node at addr and decodes the answer.
func askNode(t *testing.T, addr string, req wire.Request, resp wire.Response) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	return launch.Request(ctx, addr, req, resp)
}
