package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/corestream/corestream/tools/localcluster/launch"
)

// TestE2EAddAndRemoveANode grows a running 3-node cluster of `corestream
// serve` processes with the commands an operator types: node 4 starts
// with cluster.join and a cluster.nodes that lists it, `cluster add-node`
// records it, `cluster status` shows it become active on every node;
// then `cluster remove-node` takes it out again, and removing a node that
// holds replicas is refused with the rule.
func TestE2EAddAndRemoveANode(t *testing.T) {
	plan4, err := launch.New(launch.Options{Nodes: 4, Dir: t.TempDir(), Shards: 2, HeartbeatIntervalMs: 50, ElectionTimeoutMs: 500,
		Secret: "e2e-cluster-secret"})
	if err != nil {
		t.Fatal(err)
	}
	if err := plan4.Write(); err != nil {
		t.Fatal(err)
	}
	// Nodes 1-3 form the cluster with a roster of three.
	three := *plan4
	three.Nodes = plan4.Nodes[:3]
	c := &e2eCluster{t: t, plan: &three}
	for i := range three.Nodes {
		c.nodes = append(c.nodes, spawnServer(t, c.serverOpts(i)))
	}
	for _, s := range c.nodes {
		if err := s.waitServing(); err != nil {
			t.Fatal(err)
		}
	}
	c.waitFormed()
	c.cliOK("", "topic", "create", "kept", "--partitions", "3", "--replication-factor", "3")

	n4 := plan4.Nodes[3]
	joining := strings.Replace(plan4.TOML(3), "[cluster]\n", "[cluster]\njoin = true\n", 1)
	startServer(t, serverOpts{dir: n4.DataDir, config: joining, addr: n4.ClientAddr, shards: 2})
	var added struct {
		Members []memberJSON `json:"members"`
	}
	out := c.cliOK("", "--json", "cluster", "add-node", "4", "--addr", n4.ClientAddr, "--replication-addr", n4.ReplicationAddr)
	if err := json.Unmarshal([]byte(out), &added); err != nil || len(added.Members) != 4 || added.Members[3].State != "joining" {
		t.Fatalf("add-node --json: %v\n%s", err, out)
	}
	for _, from := range []string{three.Nodes[0].ClientAddr, three.Nodes[2].ClientAddr, n4.ClientAddr} {
		waitUntil(t, clusterWaitTimeout, "node 4 active in the cluster status of "+from, func() (bool, string) {
			_, out, _ := runBin(t, "", "--brokers", from, "--json", "cluster", "status")
			var st struct {
				Nodes []nodeJSON `json:"nodes"`
			}
			json.Unmarshal([]byte(out), &st)
			return len(st.Nodes) == 4 && st.Nodes[3].State == "active" && st.Nodes[3].Alive, out
		})
	}
	if code, _, errs := c.cli("", "cluster", "remove-node", "2"); code == 0 || !strings.Contains(errs, "node 2 holds 3 replicas") {
		t.Fatalf("removing node 2, which holds replicas: exit %d, %q", code, errs)
	}
	if out := c.cliOK("", "cluster", "remove-node", "4"); !strings.Contains(out, "node 4 is leaving") {
		t.Fatalf("remove-node: %q", out)
	}
	waitUntil(t, clusterWaitTimeout, "node 4 gone from the roster", func() (bool, string) {
		_, out, _ := runBin(t, "", "--brokers", three.Nodes[0].ClientAddr, "--json", "cluster", "status")
		var st struct {
			Nodes []nodeJSON `json:"nodes"`
		}
		json.Unmarshal([]byte(out), &st)
		return len(st.Nodes) == 3, out
	})
}
