package node

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/netio/wire"
)

// shardAwareLoad produces 50 records to each of 8 partitions (spread
// over both shards) with the SDK, pipelined, and reads them all back,
// returning how many data requests the node served on a shard other than
// the connection's.
func shardAwareLoad(t *testing.T, single bool) (crossShard uint64) {
	t.Helper()
	n := startNode(t, t.TempDir(), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := client.DialConfig(ctx, client.Config{Brokers: []string{n.ClientAddr()}, SingleConnPerNode: single})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "spread", Partitions: 8}); err != nil {
		t.Fatal(err)
	}
	p, err := cl.NewProducer(ctx, client.ProducerConfig{Partitioner: client.ManualPartitioner()})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	const perPartition = 50
	errs := make(chan error, 8*perPartition)
	for i := 0; i < perPartition; i++ {
		for part := int32(0); part < 8; part++ {
			rec := client.Record{Topic: "spread", Partition: part, Value: []byte(fmt.Sprintf("%d-%d", part, i))}
			if err := p.ProduceAsync(ctx, rec, func(_ client.Produced, err error) { errs <- err }); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := 0; i < 8*perPartition; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	cs, err := cl.NewConsumer(client.ConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := cs.Assign(ctx, "spread", nil, client.StartEarliest); err != nil {
		t.Fatal(err)
	}
	for got := 0; got < 8*perPartition; {
		recs, err := cs.Poll(ctx)
		if err != nil {
			t.Fatalf("after %d records: %v", got, err)
		}
		got += len(recs)
	}
	if !single {
		// One client: its general connection and one per shard (2),
		// however many partitions: the shard of each partition after the
		// first is asked with Stay, not found by dialling.
		if got := n.server.Stats().Accepted.Load(); got > 3 {
			t.Errorf("the client opened %d connections to a node of 2 shards, want at most 3", got)
		}
	}
	return n.crossShard.Load()
}

// With shard-aware connections (the SDK's default against a node that
// serves Home), every produce and fetch is read by the shard that owns
// its partition: none is handed to another shard. With one connection per
// node, the same load crosses shards (the test would fail without Home).
func TestShardAwareClientCrossesNoShard(t *testing.T) {
	// (Whether Home moved a connection is chance: a dial may land on its
	// shard already.)
	if cross := shardAwareLoad(t, false); cross != 0 {
		t.Errorf("shard-aware client: %d data requests served across shards, want 0", cross)
	}
	if cross := shardAwareLoad(t, true); cross == 0 {
		t.Errorf("one connection per node: no request crossed shards, so the check above proves nothing")
	}
}

// Home answers the owning shard and moves the connection there; it is
// refused for an unknown partition and on a connection with requests in
// flight.
func TestHomeRequest(t *testing.T) {
	n := startNode(t, t.TempDir(), nil)
	rc := dialHandshaken(t, n.ClientAddr())
	id := rc.createTopic("homed", 8)
	var owner0 int32 = -1
	for p := int32(0); p < 8; p++ {
		if n.shardOf(id, p) == 1 {
			owner0 = p
			break
		}
	}
	if owner0 < 0 {
		t.Fatal("no partition of 8 on shard 1")
	}
	ref := wire.PartitionRef{Topic: "homed", TopicID: id, Partition: owner0, Generation: wire.GenerationUnknown}
	before := n.crossShard.Load()
	for i := 0; i < 2; i++ { // the second Home finds the connection already there
		var resp wire.HomeResponse
		if err := rc.call(&wire.HomeRequest{PartitionRef: ref}, &resp); err != nil {
			t.Fatal(err)
		}
		if resp.Shard != 1 || resp.Shards != 2 {
			t.Fatalf("Home answered shard %d of %d, want 1 of 2", resp.Shard, resp.Shards)
		}
		if _, err := rc.produce(ref, "v"); err != nil {
			t.Fatal(err)
		}
	}
	if got := n.crossShard.Load() - before; got != 0 {
		t.Errorf("%d produce requests crossed shards after Home", got)
	}

	var resp wire.HomeResponse
	bad := wire.PartitionRef{Topic: "homed", Partition: 8, Generation: wire.GenerationUnknown}
	if err := rc.call(&wire.HomeRequest{PartitionRef: bad}, &resp); !errors.Is(err, wire.ErrUnknownTopicOrPartition) {
		t.Errorf("Home for partition 8 of 8: %v, want UNKNOWN_TOPIC_OR_PARTITION", err)
	}

	// A long poll holds a fetch in flight while Home arrives: refused,
	// but Home with Stay is answered there, and moves nothing.
	rc2 := dialHandshaken(t, n.ClientAddr())
	var end wire.ListOffsetsResponse
	if err := rc2.call(&wire.ListOffsetsRequest{PartitionRef: ref, Timestamp: wire.TimestampLatest}, &end); err != nil {
		t.Fatal(err)
	}
	rc2.send(&wire.FetchRequest{PartitionRef: ref, FetchOffset: end.Offset, MaxBytes: 1 << 20, MinBytes: 1, MaxWaitMs: 5000})
	home := rc2.send(&wire.HomeRequest{PartitionRef: ref})
	if err := rc2.readFor(home, &resp); !errors.Is(err, wire.ErrInvalidRequest) {
		t.Errorf("Home with a fetch in flight: %v, want INVALID_REQUEST", err)
	}
	moved := n.migrations.Load()
	if err := rc2.call(&wire.HomeRequest{PartitionRef: ref, Stay: true}, &resp); err != nil || resp.Shard != 1 {
		t.Errorf("Home with Stay and a fetch in flight: shard %d, %v; want shard 1", resp.Shard, err)
	}
	if n.migrations.Load() != moved {
		t.Errorf("Home with Stay moved the connection")
	}
}
