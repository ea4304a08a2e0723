package client_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/client/clienttest"
	"github.com/corestream/corestream/netio/wire"
)

// A moved primary answers NOT_PRIMARY with a hint; the client resends to
// the hinted node at once — with backoff set to 10 s, any wait would time
// the test out.
func TestNotPrimaryHintFollowedAtOnce(t *testing.T) {
	e := newEnv(t, 2, map[string]int32{"t": 1}, func(c *client.Config) {
		c.RetryBackoffMin, c.RetryBackoffMax = 10*time.Second, 10*time.Second
	})
	if _, err := e.c.ListOffsets(e.ctx, "t", 0, wire.TimestampLatest); err != nil {
		t.Fatal(err)
	}
	if err := e.fc.MovePrimary("t", 0, 2); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := e.c.ListOffsets(e.ctx, "t", 0, wire.TimestampLatest); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v: the hint was not followed at once", d)
	}
	if n1, n2 := e.fc.Requests(1, wire.APIListOffsets), e.fc.Requests(2, wire.APIListOffsets); n1 != 2 || n2 != 1 {
		t.Fatalf("node 1 got %d, node 2 got %d requests; want 2 and 1", n1, n2)
	}
	// The hint was applied to the cache: the next request goes straight to node 2.
	if _, err := e.c.ListOffsets(e.ctx, "t", 0, wire.TimestampLatest); err != nil {
		t.Fatal(err)
	}
	if n := e.fc.Requests(2, wire.APIListOffsets); n != 2 {
		t.Fatalf("node 2 got %d requests, want 2", n)
	}
}

// Nodes that name another node as the primary while routes converge (a
// primary moving) bounce a request. The first hint is followed at once,
// later attempts wait the backoff, so the attempts span the move instead
// of using themselves up in a few milliseconds.
func TestBouncingHintsBackOff(t *testing.T) {
	const backoffMin = 40 * time.Millisecond
	e := newEnv(t, 2, map[string]int32{"t": 1}, func(c *client.Config) {
		c.RetryBackoffMin, c.RetryBackoffMax = backoffMin, backoffMin
	})
	if _, err := e.c.ListOffsets(e.ctx, "t", 0, wire.TimestampLatest); err != nil {
		t.Fatal(err)
	}
	_, gen, err := e.fc.Primary("t", 0)
	if err != nil {
		t.Fatal(err)
	}
	hintTo := func(node int32) *wire.ErrorResponse {
		return &wire.ErrorResponse{Err: wire.ErrNotPrimary, Message: "moving",
			Hint: &wire.Hint{NodeID: node, Address: e.fc.Addr(node), Generation: gen}}
	}
	e.fc.AddFault(clienttest.Fault{Node: 1, APIs: []wire.APIKey{wire.APIListOffsets}, Times: 3, Err: hintTo(2)})
	e.fc.AddFault(clienttest.Fault{Node: 2, APIs: []wire.APIKey{wire.APIListOffsets}, Times: 3, Err: hintTo(1)})
	before := e.fc.Requests(1, wire.APIListOffsets) + e.fc.Requests(2, wire.APIListOffsets)
	start := time.Now()
	if _, err := e.c.ListOffsets(e.ctx, "t", 0, wire.TimestampLatest); err != nil {
		t.Fatalf("after the bounced attempts: %v", err)
	}
	d := time.Since(start)
	failed := e.fc.Requests(1, wire.APIListOffsets) + e.fc.Requests(2, wire.APIListOffsets) - before - 1
	if failed < 3 {
		t.Fatalf("%d attempts were refused; the test meant to bounce at least 3", failed)
	}
	// The first hint is followed at once, every later attempt waits at
	// least 3/4 of the backoff (the jitter takes up to a quarter).
	if least := time.Duration(failed-1) * backoffMin * 3 / 4; d < least {
		t.Fatalf("%d bounced attempts took %v: the attempts after the first hint must wait the backoff (at least %v in all)", failed, d, least)
	}
}

// A bumped generation is answered STALE_GENERATION with a hint; the
// request is resent with the new generation.
func TestStaleGenerationResent(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 1})
	if _, err := e.c.ListOffsets(e.ctx, "t", 0, wire.TimestampLatest); err != nil {
		t.Fatal(err)
	}
	e.fc.BumpGeneration("t", 0)
	if _, err := e.c.DescribePartition(e.ctx, "t", 0); err != nil {
		t.Fatal(err)
	}
}

// STALE_GENERATION without a hint refreshes the metadata before resending.
func TestStaleGenerationWithoutHintRefreshes(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 1})
	before := e.fc.Requests(0, wire.APIMetadata)
	e.fc.AddFault(clienttest.Fault{APIs: []wire.APIKey{wire.APIListOffsets}, Times: 1,
		Err: &wire.ErrorResponse{Err: wire.ErrStaleGeneration, Message: "stale"}})
	if _, err := e.c.ListOffsets(e.ctx, "t", 0, wire.TimestampLatest); err != nil {
		t.Fatal(err)
	}
	if e.fc.Requests(0, wire.APIMetadata) <= before {
		t.Fatal("no metadata refresh after STALE_GENERATION")
	}
}

// A topic created after the client loaded its metadata is found by a
// refresh on the first request.
func TestUnknownTopicRefreshes(t *testing.T) {
	e := newEnv(t, 1, nil)
	if _, err := e.fc.CreateTopic(clienttest.TopicSpec{Name: "late", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.ListOffsets(e.ctx, "late", 1, wire.TimestampLatest); err != nil {
		t.Fatal(err)
	}
	// A topic that never appears fails after one refresh.
	_, err := e.c.ListOffsets(e.ctx, "never", 0, wire.TimestampLatest)
	if !wire.IsRetriable(err) || !errorsIs(err, wire.ErrUnknownTopicOrPartition) {
		t.Fatalf("got %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}
}

// UNKNOWN_TOPIC_OR_PARTITION from the broker (a route the cache still has)
// refreshes the metadata.
func TestUnknownTopicFromBrokerRefreshes(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 1})
	before := e.fc.Requests(0, wire.APIMetadata)
	e.fc.AddFault(clienttest.Fault{APIs: []wire.APIKey{wire.APIListOffsets}, Times: 1,
		Err: &wire.ErrorResponse{Err: wire.ErrUnknownTopicOrPartition, Message: "propagating"}})
	if _, err := e.c.ListOffsets(e.ctx, "t", 0, wire.TimestampLatest); err != nil {
		t.Fatal(err)
	}
	if e.fc.Requests(0, wire.APIMetadata) <= before {
		t.Fatal("no metadata refresh after UNKNOWN_TOPIC_OR_PARTITION")
	}
}

// When the primary's node dies, the client refreshes the metadata from
// another node and finds the new primary.
func TestConnectionFailureRefreshesFromAnotherNode(t *testing.T) {
	e := newEnv(t, 2, map[string]int32{"t": 2})
	// Partition 1's primary is node 2.
	if _, err := e.c.ListOffsets(e.ctx, "t", 1, wire.TimestampLatest); err != nil {
		t.Fatal(err)
	}
	e.fc.StopNode(2)
	if err := e.fc.MovePrimary("t", 1, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.ListOffsets(e.ctx, "t", 1, wire.TimestampLatest); err != nil {
		t.Fatalf("after node 2 died: %v", err)
	}
	if n := e.fc.Requests(1, wire.APIListOffsets); n != 1 {
		t.Fatalf("node 1 got %d requests, want 1", n)
	}
}

// The metadata is refreshed periodically without any request failing.
func TestPeriodicMetadataRefresh(t *testing.T) {
	e := newEnv(t, 1, nil, func(c *client.Config) { c.MetadataMaxAge = 5 * time.Millisecond })
	base := e.fc.Requests(0, wire.APIMetadata)
	waitFor(t, "periodic refreshes", func() bool { return e.fc.Requests(0, wire.APIMetadata) >= base+3 })
}

// Metadata-changing requests follow NOT_METADATA_PRIMARY hints; offsets
// follow NOT_COORDINATOR hints.
func TestAdminFollowsMetadataPrimaryHints(t *testing.T) {
	e := newEnv(t, 2, map[string]int32{"t": 1})
	e.fc.SetMetadataPrimary(2) // the client's cache still says node 1
	if _, err := e.c.CreateTopic(e.ctx, client.TopicSpec{Name: "u", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if n := e.fc.Requests(2, wire.APICreateTopic); n != 1 {
		t.Fatalf("node 2 got %d CreateTopic, want 1", n)
	}
	e.fc.SetMetadataPrimary(1)
	if err := e.c.CommitOffsets(e.ctx, "g", []wire.OffsetCommit{{Topic: "t", Partition: 0, Offset: 0}}); err != nil {
		t.Fatal(err)
	}
}

// An unknown topic fails fast: one metadata refresh, answered by a node
// that sees the metadata quorum, confirms that it does not exist, and the
// error names it. Before, a data request refreshed three times, a producer
// three times with backoffs, and DescribeTopic retried UNKNOWN_TOPIC for
// its ten attempts (about 4 s with the default backoff).
func TestUnknownTopicFailsAfterOneRefresh(t *testing.T) {
	e := newEnv(t, 2, map[string]int32{"t": 1}, func(c *client.Config) {
		c.RetryBackoffMin, c.RetryBackoffMax = 200*time.Millisecond, time.Second // the defaults' order of magnitude
	})
	p := e.producer(client.ProducerConfig{})
	check := func(what string, call func() error) {
		t.Helper()
		before := e.fc.Requests(0, wire.APIMetadata)
		start := time.Now()
		err := call()
		d := time.Since(start)
		var er *wire.ErrorResponse
		if !errors.Is(err, wire.ErrUnknownTopicOrPartition) || !errors.As(err, &er) || !strings.Contains(er.Message, `"nope"`) {
			t.Fatalf("%s: got %v, want UNKNOWN_TOPIC_OR_PARTITION naming the topic", what, err)
		}
		if n := e.fc.Requests(0, wire.APIMetadata) - before; n > 1 {
			t.Fatalf("%s: %d metadata refreshes, want at most 1", what, n)
		}
		if d > 500*time.Millisecond { // at most a MetadataRefreshBackoff (100 ms) of pacing
			t.Fatalf("%s: failed after %v, want at once", what, d)
		}
		t.Logf("%s: %v in %v", what, err, d)
	}
	check("ListOffsets", func() error { _, err := e.c.ListOffsets(e.ctx, "nope", 0, wire.TimestampLatest); return err })
	check("ProduceAsync", func() error {
		return p.ProduceAsync(e.ctx, client.Record{Topic: "nope", Value: []byte("v")}, nil)
	})
	check("Partitions", func() error { _, err := e.c.Partitions(e.ctx, "nope"); return err })
	check("DescribeTopic", func() error { _, err := e.c.DescribeTopic(e.ctx, "nope"); return err })
	check("DeleteTopic", func() error { _, err := e.c.DeleteTopic(e.ctx, "nope"); return err })
	// A topic that exists but is not cached yet is still found.
	if _, err := e.fc.CreateTopic(clienttest.TopicSpec{Name: "late", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Produce(e.ctx, client.Record{Topic: "late", Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
}

// While only nodes without a metadata quorum answer (a cluster restarting:
// nodes replaying the metadata), a topic missing from their answers is
// not declared unknown after one refresh: the client retries, and finds
// the topic once a node that sees the quorum answers.
func TestUnknownTopicNotConfirmedByUntrustedAnswers(t *testing.T) {
	e := newEnv(t, 3, nil)
	e.fc.CutOff(1) // the seed, and the only node the new client knows
	c, err := client.DialConfig(e.ctx, client.Config{Brokers: []string{e.fc.Addr(1)}, DialTimeout: 5 * time.Second,
		RetryBackoffMin: 50 * time.Millisecond, RetryBackoffMax: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := e.fc.CreateTopic(clienttest.TopicSpec{Name: "t", Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	// Node 1's untrusted answer names nodes 2 and 3, which answer trusted;
	// partition 1's primary is node 2.
	if _, err := c.ListOffsets(e.ctx, "t", 1, wire.TimestampLatest); err != nil {
		t.Fatal(err)
	}
}
