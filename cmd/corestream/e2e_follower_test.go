package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/tools/localcluster/launch"
)

// TestE2EFollowerReadsFromTheConsumersRack: three nodes in racks a, b and
// c; a consumer in the rack of a follower of the partition is sent there
// by the primary and reads everything from it; then the primary is
// paused (SIGSTOP), more is written through the primary elected in its
// place, and the consumer reads that in its rack: from the same replica,
// as a follower or as the primary the group elected.
func TestE2EFollowerReadsFromTheConsumersRack(t *testing.T) {
	const topic = "near"
	racks := []string{"a", "b", "c"}
	c := startCluster(t, clusterOpts{nodes: 3, mutate: func(p *launch.Plan) {
		for i := range p.Nodes {
			p.Nodes[i].Rack = racks[i]
		}
	}})
	// A short request timeout: requests sent to the paused node before
	// the client learns of the new primary give up sooner.
	cfg := fastRetries
	cfg.RequestTimeout = 2 * time.Second
	cl := c.dial(cfg)
	createTopic(t, cl, client.TopicSpec{Name: topic, Partitions: 1, ReplicationFactor: 3})
	c.waitInSync(1)
	var lines strings.Builder
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&lines, "m%d\n", i)
	}
	c.cliOK(lines.String(), "produce", topic)
	c.waitInSync(1)

	status := c.cliOK("", "cluster", "status")
	for i, r := range racks {
		if !regexp.MustCompile(fmt.Sprintf(`(?m)^%d\s+\S+\s+\S+\s+%s\s+yes\b`, i+1, r)).MatchString(status) {
			t.Fatalf("cluster status does not show node %d in rack %s:\n%s", i+1, r, status)
		}
	}
	routes := topicRoutes(t, cl, topic)
	primary := routes[0].PrimaryID
	var near int32
	for _, r := range routes[0].Replicas {
		if r != primary {
			near = r
			break
		}
	}
	rack := racks[near-1]
	t.Logf("primary node %d (rack %s); the consumer's rack %s holds node %d", primary, racks[primary-1], rack, near)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := cl.NewConsumer(client.ConsumerConfig{Rack: rack, FetchMaxWait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := cs.Assign(ctx, topic, []int32{0}, client.StartEarliest); err != nil {
		t.Fatal(err)
	}
	var got []string
	readUntil := func(n int) {
		t.Helper()
		for len(got) < n {
			recs, err := cs.Poll(ctx)
			if err != nil {
				t.Fatalf("poll after %d records: %v", len(got), err)
			}
			for _, r := range recs {
				got = append(got, string(r.Value))
			}
		}
	}
	readUntil(50)
	waitUntil(t, clusterWaitTimeout, "the consumer to read from its rack's follower", func() (bool, string) {
		id, _ := cs.ReadReplica(topic, 0)
		return id == near, fmt.Sprintf("reading from node %d (0: the primary %d), want %d", id, primary, near)
	})

	// Pause the primary: the group elects another while the consumer
	// keeps reading from its rack.
	if err := c.node(primary).cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.node(primary).cmd.Process.Signal(syscall.SIGCONT) })
	paused := time.Now()
	// Through the SDK client, which knows the cluster already: a new
	// command would bootstrap from the paused node first.
	pr, err := cl.NewProducer(ctx, client.ProducerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close(context.Background())
	for i := 50; i < 70; i++ {
		if _, err := pr.Produce(ctx, client.Record{Topic: topic, Value: []byte(fmt.Sprintf("m%d", i))}); err != nil {
			t.Fatalf("produce m%d with the primary paused: %v", i, err)
		}
	}
	readUntil(70)
	t.Logf("20 records written and read from rack %s within %v of pausing the primary", rack, time.Since(paused).Round(time.Millisecond))
	for i, v := range got {
		if v != fmt.Sprintf("m%d", i) {
			t.Fatalf("record %d is %q, want m%d", i, v, i)
		}
	}
	// The rack's node serves either as the follower it was or, when the
	// group elected it, as the primary (which then serves its own rack).
	waitUntil(t, clusterWaitTimeout, "the consumer to read in its rack", func() (bool, string) {
		id, _ := cs.ReadReplica(topic, 0)
		if id == near {
			return true, ""
		}
		now := topicRoutes(t, cl, topic)[0].PrimaryID
		return id == 0 && now == near, fmt.Sprintf("reading from node %d (0: the primary, now node %d), want node %d", id, now, near)
	})
}
