package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/corestream/corestream/client"
)

// TestE2EDrainCommands drains node 1 of a 4-node cluster with the
// commands an operator types: --wait follows the drain until the node
// holds nothing, cluster status names the cluster and shows the node
// draining and empty, a second drain and an unknown node are refused
// with what is wrong, and undrain lifts the mark.
func TestE2EDrainCommands(t *testing.T) {
	const topic = "dr"
	c := startCluster(t, clusterOpts{nodes: 4})
	cl := c.dial(fastRetries)
	createTopic(t, cl, client.TopicSpec{Name: topic, Partitions: 4, ReplicationFactor: 3})
	var lines strings.Builder
	for i := 0; i < 40; i++ {
		fmt.Fprintf(&lines, "m%d\n", i)
	}
	c.cliOK(lines.String(), "produce", topic)

	if code, _, errs := c.cli("", "node", "drain", "9"); code == 0 || !strings.Contains(errs, "node 9 is not in the roster") {
		t.Fatalf("drain of node 9: exit %d, %q", code, errs)
	}
	if out := c.cliOK("", "node", "drain", "1", "--dry-run"); !strings.Contains(out, "dry run") {
		t.Fatalf("dry run: %q", out)
	}
	out := c.cliOK("", "node", "drain", "1", "--wait")
	if !strings.Contains(out, "node 1 draining") || !strings.Contains(out, "node 1 holds nothing") {
		t.Fatalf("drain --wait: %q", out)
	}
	if code, _, errs := c.cli("", "node", "drain", "1"); code == 0 || !strings.Contains(errs, "node 1 has been draining since") {
		t.Fatalf("a second drain: exit %d, %q", code, errs)
	}
	status := c.cliOK("", "cluster", "status")
	if !regexp.MustCompile(`cluster id: [0-9a-f]{8}-[0-9a-f]{4}-`).MatchString(status) ||
		!regexp.MustCompile(`(?m)^1 .*\byes\s+yes\s+0\s+\d+\s+0\s+active\s*$`).MatchString(status) {
		t.Fatalf("cluster status after the drain: %q", status)
	}
	var st struct {
		ClusterID string `json:"cluster_id"`
		Nodes     []struct {
			ID       int32 `json:"id"`
			Draining bool  `json:"draining"`
			Replicas int32 `json:"replicas"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(c.cliOK("", "cluster", "status", "--json")), &st); err != nil || st.ClusterID == "" ||
		!st.Nodes[0].Draining || st.Nodes[0].Replicas != 0 {
		t.Fatalf("cluster status --json: %+v, %v", st, err)
	}
	if got := c.cliOK("", "consume", topic, "--count", "40"); len(strings.Split(strings.TrimSpace(got), "\n")) != 40 {
		t.Fatalf("read back after the drain: %q", got)
	}
	if out := c.cliOK("", "node", "undrain", "1"); !strings.Contains(out, "node 1 undrained") {
		t.Fatalf("undrain: %q", out)
	}
	if out := c.cliOK("", "cluster", "reassign", "--json"); !strings.Contains(out, `"drains": []`) {
		t.Fatalf("drains after undrain: %q", out)
	}
}
