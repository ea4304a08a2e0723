package launch

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/corestream/corestream/cluster/config"
)

// Every node's configuration is one the broker accepts, names that node
// with its own addresses and data directory, and shares the roster and
// the secrets with the others.
func TestPlanConfigs(t *testing.T) {
	p, err := New(Options{Nodes: 5, Dir: t.TempDir(), ReplicationFactor: "3", K: 2, Shards: 2, Fsync: "never"})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Write(); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var first config.Config
	for i, n := range p.Nodes {
		text, err := os.ReadFile(n.Config)
		if err != nil {
			t.Fatal(err)
		}
		c, err := config.Parse(string(text))
		if err != nil {
			t.Fatalf("node %d: %v\n%s", n.ID, err, text)
		}
		if c.Node.ID != n.ID || c.Node.ClientAddr != n.ClientAddr || c.Node.ReplicationAddr != n.ReplicationAddr ||
			c.Node.HTTPAddr != n.HTTPAddr || c.Node.KafkaAddr != n.KafkaAddr || c.Node.DataDir != n.DataDir || filepath.Dir(n.Config) != n.DataDir {
			t.Fatalf("node %d: [node] is %+v, planned %+v", n.ID, c.Node, n)
		}
		if len(c.Cluster.Nodes) != 5 || c.Cluster.Coordinator.ReplicaConnectionsPerPeer != 2 || c.Shard.Count != 2 ||
			c.Storage.Fsync != "never" || c.Cluster.DefaultReplicationFactor != 3 {
			t.Fatalf("node %d: %+v", n.ID, c)
		}
		if i == 0 {
			first = c
		} else if c.Cluster.Secret != first.Cluster.Secret || c.HTTP.JWTSecret != first.HTTP.JWTSecret || c.Cluster.Secret == "" {
			t.Fatalf("node %d does not share the secrets", n.ID)
		}
		if c.Cluster.Nodes[i].KafkaAddr != n.KafkaAddr {
			t.Fatalf("node %d: the roster advertises Kafka address %q, planned %q", n.ID, c.Cluster.Nodes[i].KafkaAddr, n.KafkaAddr)
		}
		for _, a := range []string{n.ClientAddr, n.ReplicationAddr, n.HTTPAddr, n.KafkaAddr, n.DataDir} {
			if a == "" || seen[a] {
				t.Fatalf("%s planned twice", a)
			}
			seen[a] = true
		}
	}
}

// -racks deals racks to the nodes in turn, and each node's configuration
// names its rack as node.rack and in every roster entry.
func TestPlanRacks(t *testing.T) {
	p, err := New(Options{Nodes: 5, Dir: t.TempDir(), Racks: []string{"a", "b", "c"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Write(); err != nil {
		t.Fatal(err)
	}
	want := []string{"a", "b", "c", "a", "b"}
	for i, n := range p.Nodes {
		text, err := os.ReadFile(n.Config)
		if err != nil {
			t.Fatal(err)
		}
		c, err := config.Parse(string(text))
		if err != nil {
			t.Fatalf("node %d: %v", n.ID, err)
		}
		if c.Node.Rack != want[i] {
			t.Errorf("node %d: node.rack %q, want %q", n.ID, c.Node.Rack, want[i])
		}
		for j, m := range c.Cluster.Nodes {
			if m.Rack != want[j] {
				t.Errorf("node %d's roster: node %d in rack %q, want %q", n.ID, m.ID, m.Rack, want[j])
			}
		}
	}
	if _, err := New(Options{Nodes: 2, Dir: "x", Racks: []string{"a", "b", "c"}}); !errors.Is(err, ErrOptions) {
		t.Errorf("3 racks for 2 nodes: %v, want ErrOptions", err)
	}
}

// Options the broker would refuse are refused before anything is written.
func TestPlanRefusals(t *testing.T) {
	for _, o := range []Options{{Nodes: 33, Dir: "x"}, {Nodes: 3}, {Nodes: 3, Dir: "x", ReplicationFactor: "many"}} {
		if _, err := New(o); !errors.Is(err, ErrOptions) {
			t.Errorf("%+v: %v, want ErrOptions", o, err)
		}
	}
	dir := t.TempDir()
	p, err := New(Options{Nodes: 2, Dir: dir, ReplicationFactor: "3"})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Write(); !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("factor 3 on 2 nodes: %v, want config.ErrInvalid", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("a refused plan wrote %d entries", len(entries))
	}
}

// A node restarted on its port must not find it taken by an outgoing
// connection's source port: the picked ports lie below the ephemeral range.
func TestFreeAddrsAvoidTheEphemeralRange(t *testing.T) {
	lo := ephemeralPortStart()
	if lo-fixedPortMin < 4*12 {
		t.Skipf("ephemeral range starts at %d: no room below it", lo)
	}
	addrs, err := FreeAddrs("127.0.0.1", 12)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, a := range addrs {
		_, ps, err := net.SplitHostPort(a)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(ps)
		if port < fixedPortMin || port >= lo {
			t.Errorf("port %d is outside [%d, %d): the kernel may hand it to an outgoing connection", port, fixedPortMin, lo)
		}
		if seen[a] {
			t.Errorf("%s picked twice", a)
		}
		seen[a] = true
	}
}
