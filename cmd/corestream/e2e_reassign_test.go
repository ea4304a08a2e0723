package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
)

// TestE2EReassignCommands moves a factor-2 partition onto the third node
// with the commands an operator types: a bad plan is refused with what is
// wrong, the dry run starts nothing, --wait follows the move to its end,
// and every message written before is read back from the new replicas.
func TestE2EReassignCommands(t *testing.T) {
	const topic = "mv"
	c := startCluster(t, clusterOpts{nodes: 3})
	cl := c.dial(fastRetries)
	createTopic(t, cl, client.TopicSpec{Name: topic, Partitions: 1, ReplicationFactor: 2})
	var lines strings.Builder
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&lines, "m%d\n", i)
	}
	c.cliOK(lines.String(), "produce", topic)
	reps := topicRoutes(t, cl, topic)[0].Replicas
	var other int32
	for id := int32(1); id <= 3; id++ {
		if id != reps[0] && id != reps[1] {
			other = id
		}
	}
	target := fmt.Sprintf("%d,%d", other, reps[1])

	if code, _, errs := c.cli("", "partition", "reassign", topic, "0", "--replicas", fmt.Sprintf("%d,%d,%d", other, reps[0], reps[1])); code == 0 ||
		!strings.Contains(errs, "replication factor is 2") {
		t.Fatalf("a factor change: exit %d, %q", code, errs)
	}
	plan := filepath.Join(t.TempDir(), "plan.json")
	body := fmt.Sprintf(`{"version": 1, "partitions": [{"topic": %q, "partition": 0, "replicas": [%d, 9]}]}`, topic, other)
	if err := os.WriteFile(plan, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := c.cli("", "cluster", "reassign", "--plan", plan); code == 0 || !strings.Contains(errs, "node 9 is not in the roster") {
		t.Fatalf("a plan naming node 9: exit %d, %q", code, errs)
	}
	if out := c.cliOK("", "partition", "reassign", topic, "0", "--replicas", target, "--dry-run"); !strings.Contains(out, "dry run") {
		t.Fatalf("dry run: %q", out)
	}
	if out := c.cliOK("", "cluster", "reassign"); !strings.HasPrefix(out, "0 moves in progress") {
		t.Fatalf("moves after a dry run: %q", out)
	}
	out := c.cliOK("", "partition", "reassign", topic, "0", "--replicas", target, "--wait")
	if !strings.Contains(out, "1 moves started") || !strings.Contains(out, "every move finished") {
		t.Fatalf("reassign --wait: %q", out)
	}
	waitUntil(t, 30*time.Second, "the new replicas in the routes", func() (bool, string) {
		got := topicRoutes(t, cl, topic)[0].Replicas
		return fmt.Sprint(got) == fmt.Sprint([]int32{other, reps[1]}), fmt.Sprint(got)
	})
	if got := c.cliOK("", "consume", topic, "--count", "50"); got != lines.String() {
		t.Fatalf("read back after the move: %q", got)
	}
}
