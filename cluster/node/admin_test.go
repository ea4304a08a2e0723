package node

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/netio/wire"
)

// Producer ids are never handed out twice across restarts (the node
// reserves them in blocks on disk before handing any out, so a crash
// skips the rest of a block rather than reusing it).
func TestProducerIDsNeverReused(t *testing.T) {
	dir := t.TempDir()
	seen := map[int64]bool{}
	for run := 0; run < 3; run++ {
		n := runNode(t, dir, nil)
		rc := dialHandshaken(t, n.ClientAddr())
		for i := 0; i < 5; i++ {
			var resp wire.InitProducerResponse
			if err := rc.call(&wire.InitProducerRequest{ProducerID: -1, ProducerEpoch: -1}, &resp); err != nil {
				t.Fatal(err)
			}
			if seen[resp.ProducerID] || resp.ProducerEpoch != 0 || resp.ProducerID>>48 != 1 {
				t.Fatalf("run %d: producer id %#x epoch %d (seen before: %v)", run, resp.ProducerID, resp.ProducerEpoch, seen[resp.ProducerID])
			}
			seen[resp.ProducerID] = true
		}
		// A known producer bumps its epoch and keeps its id.
		var bumped wire.InitProducerResponse
		if err := rc.call(&wire.InitProducerRequest{ProducerID: 1<<48 | 3, ProducerEpoch: 4}, &bumped); err != nil || bumped.ProducerID != 1<<48|3 || bumped.ProducerEpoch != 5 {
			t.Fatalf("epoch bump: %+v %v", bumped, err)
		}
		n.stop(t)
	}
}

// Partitions added to a topic are routable when the request returns, and
// are there after a restart; a count that is not an increase is refused.
func TestAddPartitions(t *testing.T) {
	dir := t.TempDir()
	n := runNode(t, dir, nil)
	rc := dialHandshaken(t, n.ClientAddr())
	id := rc.createTopic("grow", 1)
	var resp wire.AddPartitionsResponse
	if err := rc.call(&wire.AddPartitionsRequest{Name: "grow", TopicID: id, Partitions: 4}, &resp); err != nil || resp.Partitions != 4 {
		t.Fatalf("add partitions: %+v %v", resp, err)
	}
	// The count it already has is not an increase: refused, as by Kafka.
	err := rc.call(&wire.AddPartitionsRequest{Name: "grow", TopicID: id, Partitions: 4}, &resp)
	if !errors.Is(err, wire.ErrInvalidPartitions) || !strings.Contains(err.Error(), "already has 4 partitions") {
		t.Fatalf("add partitions to the current count: %v", err)
	}
	if err := rc.call(&wire.AddPartitionsRequest{Name: "grow", TopicID: id, Partitions: 2}, &resp); !errors.Is(err, wire.ErrInvalidPartitions) {
		t.Fatalf("shrinking: %v", err)
	}
	for p := int32(0); p < 4; p++ {
		ref := wire.PartitionRef{Topic: "grow", TopicID: id, Partition: p, Generation: wire.GenerationUnknown}
		if _, err := rc.produce(ref, fmt.Sprint("in ", p)); err != nil {
			t.Fatalf("produce to partition %d right after adding it: %v", p, err)
		}
	}
	n.stop(t)
	n = runNode(t, dir, nil)
	rc = dialHandshaken(t, n.ClientAddr())
	for p := int32(0); p < 4; p++ {
		ref := wire.PartitionRef{Topic: "grow", TopicID: id, Partition: p, Generation: wire.GenerationUnknown}
		var vals []string
		waitFor(t, 10*time.Second, "the partition to open", func() bool {
			var err error
			vals, _, err = rc.fetch(ref, 0)
			return err == nil
		})
		if len(vals) != 1 || vals[0] != fmt.Sprint("in ", p) {
			t.Fatalf("partition %d after the restart: %q", p, vals)
		}
	}
}

// Names starting with "__" are the broker's: a client cannot create a
// topic that shares the metadata group's name (and directory).
func TestInternalTopicNamesReserved(t *testing.T) {
	n := runNode(t, t.TempDir(), nil)
	rc := dialHandshaken(t, n.ClientAddr())
	for _, name := range []string{"__meta", "__consumer_offsets"} {
		var resp wire.CreateTopicResponse
		err := rc.call(&wire.CreateTopicRequest{Name: name, Partitions: 1, ReplicationFactor: 1}, &resp)
		if !errors.Is(err, wire.ErrInvalidTopicName) || !strings.Contains(err.Error(), "reserved") {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	var list wire.ListTopicsResponse
	if err := rc.call(&wire.ListTopicsRequest{}, &list); err != nil || len(list.Topics) != 0 {
		t.Fatalf("topics after refused creates: %+v %v", list.Topics, err)
	}
	rc.createTopic("_one_underscore", 1)
}

// ListOffsets: earliest, latest and by time, on committed data.
func TestListOffsets(t *testing.T) {
	n := runNode(t, t.TempDir(), nil)
	rc := dialHandshaken(t, n.ClientAddr())
	id := rc.createTopic("times", 1)
	ref := wire.PartitionRef{Topic: "times", TopicID: id, Generation: wire.GenerationUnknown}
	before := time.Now().UnixMilli()
	res, err := rc.produce(ref, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	list := func(ts int64) wire.ListOffsetsResponse {
		t.Helper()
		var lo wire.ListOffsetsResponse
		if err := rc.call(&wire.ListOffsetsRequest{PartitionRef: ref, Timestamp: ts}, &lo); err != nil {
			t.Fatal(err)
		}
		return lo
	}
	if lo := list(wire.TimestampEarliest); lo.Offset != 0 {
		t.Fatalf("earliest: %+v", lo)
	}
	if lo := list(wire.TimestampLatest); lo.Offset != res.BaseOffset+2 || lo.HighWatermark != lo.Offset {
		t.Fatalf("latest: %+v after a batch at %d", lo, res.BaseOffset)
	}
	if lo := list(before - 1); lo.Offset > res.BaseOffset {
		t.Fatalf("by time before the batch: %+v", lo)
	}
	if lo := list(time.Now().Add(time.Hour).UnixMilli()); lo.Offset != -1 {
		t.Fatalf("by time after everything: %+v", lo)
	}
}
