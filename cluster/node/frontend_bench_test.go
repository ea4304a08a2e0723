package node

import (
	"testing"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/netio/wire"
)

// BenchmarkNativeRequests measures one native request at a time over
// loopback against a node in this process (fsync off, so the disk does
// not dominate), allocations included on both sides: the cost the front
// end and the service add to a request. "produce/inline" runs where the
// connection has moved to the partition's shard; "produce/cross-shard"
// alternates between partitions of the two shards, so half the requests
// hop to the other shard and back.
func BenchmarkNativeRequests(b *testing.B) {
	n := runNode(b, b.TempDir(), func(c *config.Config) { c.Storage.Fsync = "never" })
	rc := dialHandshaken(b, n.ClientAddr())
	id := rc.createTopic("bench", 8)
	byShard := map[int]int32{}
	for p := int32(0); p < 8; p++ {
		byShard[n.shardOf(id, p)] = p
	}
	ref := func(p int32) wire.PartitionRef {
		return wire.PartitionRef{Topic: "bench", TopicID: id, Partition: p, Generation: wire.GenerationUnknown}
	}
	batch := mkBatch(b, "a value of some thirty-two bytes")
	produce := func(b *testing.B, p int32) {
		var resp wire.ProduceResponse
		if err := rc.call(&wire.ProduceRequest{PartitionRef: ref(p), Records: batch}, &resp); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("produce/inline", func(b *testing.B) {
		for i := 0; i < 16; i++ {
			produce(b, byShard[0]) // the connection moves to the partition's shard
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			produce(b, byShard[0])
		}
	})
	b.Run("produce/cross-shard", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			produce(b, byShard[i%2])
		}
	})
	b.Run("fetch", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			var resp wire.FetchResponse
			if err := rc.call(&wire.FetchRequest{PartitionRef: ref(byShard[0]), FetchOffset: 1, MaxBytes: 4096}, &resp); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("metadata", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			var resp wire.MetadataResponse
			if err := rc.call(&wire.MetadataRequest{}, &resp); err != nil {
				b.Fatal(err)
			}
		}
	})
}
