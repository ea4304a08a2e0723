package node

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/shard/partition"
)

// await calls a service call from this goroutine (no shard) and waits
// for its completion.
func await[R any](call func(done func(R, error))) (R, error) {
	type answer struct {
		v   R
		err error
	}
	out := make(chan answer, 1)
	call(func(v R, err error) { out <- answer{v, err} })
	a := <-out
	return a.v, a.err
}

// readRecords lists the offsets and values of the data records in the
// fetched batches (control batches skipped).
func readRecords(t *testing.T, data []byte) (offsets []int64, values []string) {
	t.Helper()
	batches, _, err := batch.Split(nil, data)
	if err != nil {
		t.Fatal(err)
	}
	var it batch.Records
	for _, b := range batches {
		if err := it.Reset(b); err != nil {
			t.Fatal(err)
		}
		if hdr := it.Header(); hdr.IsControl() {
			continue
		}
		for it.Next() {
			offsets = append(offsets, it.Record().Offset)
			values = append(values, string(it.Record().Value))
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return offsets, values
}

// svcCreate creates a topic through the service, retrying while the
// lone node is still electing itself metadata primary.
func svcCreate(t testing.TB, s service.Service, name string, parts int32) service.CreateTopicResult {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := await(func(done func(service.CreateTopicResult, error)) {
			s.CreateTopic(nil, &service.CreateTopicRequest{Name: name, Partitions: parts, ReplicationFactor: 1}, done)
		})
		if err == nil {
			return res
		}
		var se *service.Error
		if !errors.As(err, &se) || time.Now().After(deadline) ||
			!(errors.Is(err, service.ErrMetadataNotReady) || errors.Is(err, service.ErrNotMetadataPrimary)) {
			t.Fatalf("create %s: %v (%T)", name, err, err)
		}
		time.Sleep(10 * time.Millisecond) // a retry interval, not a wait for a condition
	}
}

func oneBatch(t *testing.T, value string) []byte {
	t.Helper()
	b, err := batch.NewBuilder(batch.Options{})
	if err == nil {
		err = b.AppendKV(time.Now().UnixMilli(), nil, []byte(value))
	}
	var data []byte
	if err == nil {
		data, err = b.Build()
	}
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// The service answers produce, fetch, list offsets and the metadata
// calls in its own types, and its errors are *service.Error with the
// kinds its doc names, hints carrying the client address.
func TestServiceCallsAndErrorKinds(t *testing.T) {
	n := runNode(t, t.TempDir(), nil)
	s := service.Service(n.svc)
	created := svcCreate(t, s, "svc", 2)
	ref := service.PartitionRef{Topic: "svc", Partition: 1, TopicID: created.ID, Generation: service.GenerationUnknown}

	pr, err := await(func(done func(service.ProduceResult, error)) {
		s.Produce(nil, &service.ProduceRequest{PartitionRef: ref, Records: oneBatch(t, "hello")}, done)
	})
	if err != nil || pr.BaseOffset < 0 {
		t.Fatalf("produce: %+v %v", pr, err)
	}
	fr, err := await(func(done func(service.FetchResult, error)) {
		s.Fetch(nil, &service.FetchRequest{PartitionRef: ref, MaxBytes: 1 << 20}, done)
	})
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	data, err := fr.Records.AppendTo(nil)
	fr.Records.Release()
	if err != nil || int64(len(data)) != fr.Records.Bytes {
		t.Fatalf("fetched %d of %d bytes: %v", len(data), fr.Records.Bytes, err)
	}
	offs, vals := readRecords(t, data)
	end := pr.BaseOffset + 1 // the log starts with the primary's no-op entry
	if len(offs) != 1 || offs[0] != pr.BaseOffset || vals[0] != "hello" || fr.HighWatermark != end {
		t.Fatalf("fetched %v %q, high watermark %d; want [%d] hello, %d", offs, vals, fr.HighWatermark, pr.BaseOffset, end)
	}
	lo, err := await(func(done func(service.ListOffsetsResult, error)) {
		s.ListOffsets(nil, &service.ListOffsetsRequest{PartitionRef: ref, Timestamp: service.TimestampLatest}, done)
	})
	if err != nil || lo.Offset != end {
		t.Fatalf("list offsets: %+v %v", lo, err)
	}

	// Routing errors, each with its kind.
	produceErr := func(ref service.PartitionRef) error {
		_, err := await(func(done func(service.ProduceResult, error)) {
			s.Produce(nil, &service.ProduceRequest{PartitionRef: ref, Records: oneBatch(t, "x")}, done)
		})
		var se *service.Error
		if err != nil && !errors.As(err, &se) {
			t.Fatalf("%+v: %T is not a *service.Error", ref, err)
		}
		return err
	}
	wrongID := ref
	wrongID.TopicID = metadata.TopicID{1}
	noPart := ref
	noPart.Partition = 7
	noTopic := ref
	noTopic.Topic = "nope"
	for _, r := range []service.PartitionRef{wrongID, noPart, noTopic} {
		if err := produceErr(r); !errors.Is(err, service.ErrUnknownTopicOrPartition) {
			t.Errorf("%+v: %v, want ErrUnknownTopicOrPartition", r, err)
		}
	}
	stale := ref
	stale.Generation = 0
	err = produceErr(stale)
	var se *service.Error
	if !errors.Is(err, partition.ErrStaleGeneration) || !errors.As(err, &se) || se.Hint == nil ||
		se.Hint.NodeID != 1 || se.Hint.ClientAddr != n.ClientAddr() {
		t.Fatalf("stale generation: %#v", err)
	}

	// Metadata calls.
	md, err := s.Metadata(service.MetadataRequest{Topics: []string{"svc", "nope"}})
	if err != nil || len(md.Topics) != 2 || len(md.Topics[0].Partitions) != 2 || md.Topics[0].Partitions[1].PrimaryID != 1 ||
		!errors.Is(md.Topics[1].Err, service.ErrUnknownTopicOrPartition) || len(md.Brokers) != 1 || md.Brokers[0].ClientAddr != n.ClientAddr() {
		t.Fatalf("metadata: %+v %v", md, err)
	}
	if _, err := s.DescribeTopic("nope"); !errors.Is(err, service.ErrUnknownTopicOrPartition) {
		t.Fatalf("describe an unknown topic: %v", err)
	}
	if _, err := await(func(done func(service.CreateTopicResult, error)) {
		s.CreateTopic(nil, &service.CreateTopicRequest{Name: "svc", Partitions: 1}, done)
	}); !errors.Is(err, service.ErrTopicExists) {
		t.Fatalf("create twice: %v", err)
	}
	id, err := await(func(done func(metadata.TopicID, error)) {
		s.DeleteTopic(nil, &service.DeleteTopicRequest{Name: "svc"}, done)
	})
	if err != nil || id != created.ID {
		t.Fatalf("delete: %v %v, want id %v", id, err, created.ID)
	}
}

// A produce served on another shard than the caller's copies its batch
// before it leaves the call, so the caller may reuse the buffer at once:
// the native handler lends the connection's read buffer.
func TestServiceProduceDetachesTheCallersBuffer(t *testing.T) {
	n := runNode(t, t.TempDir(), nil)
	created := svcCreate(t, n.svc, "lend", 1)
	ref := service.PartitionRef{Topic: "lend", TopicID: created.ID, Generation: service.GenerationUnknown}
	owner := n.group.Shard(n.shardOf(created.ID, 0))
	// Hold the owner shard, so that the produce can only run after the
	// buffer is overwritten.
	release := make(chan struct{})
	if err := owner.Post(func() { <-release }); err != nil {
		t.Fatal(err)
	}
	buf := oneBatch(t, "lent")
	out := make(chan error, 1)
	n.svc.Produce(nil, &service.ProduceRequest{PartitionRef: ref, Records: buf}, func(_ service.ProduceResult, err error) { out <- err })
	copy(buf, bytes.Repeat([]byte{0xee}, len(buf)))
	close(release)
	if err := <-out; err != nil {
		t.Fatalf("the produce read the caller's buffer after the call: %v", err)
	}
	fr, err := await(func(done func(service.FetchResult, error)) {
		n.svc.Fetch(nil, &service.FetchRequest{PartitionRef: ref, MaxBytes: 1 << 20}, done)
	})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := fr.Records.AppendTo(nil)
	fr.Records.Release()
	if _, vals := readRecords(t, data); len(vals) != 1 || vals[0] != "lent" {
		t.Fatalf("stored %q", vals)
	}
}

// The parts answer in the service's kinds, so the service reads no front
// end's code table backwards: the metadata replica's NOT_PRIMARY becomes
// ErrNotMetadataPrimary with the primary's address, its other errors keep
// their kind through metaKindErr (not INVALID_REQUEST); that every kind
// then crosses the service and the native table with its message and
// hint is nodesvc's TestSvcErrKeepsKinds. (The
// admin calls' rules answer in kinds of their own: cluster/service's
// validators, TestAdminRulesSameKindEverywhere.)
func TestPartsAnswerInKinds(t *testing.T) {
	n := &Node{self: 1, roster: newRosterBook([]config.RosterNode{{ID: 1, ClientAddr: "10.0.0.1:7070"}, {ID: 2, ClientAddr: "10.0.0.2:7070"}})}
	err := metaKindErr(n.metaErr(&partition.Error{Kind: partition.ErrNotPrimary, Message: "not primary", Leader: 2, Generation: 9}))
	var se *service.Error
	if !errors.As(err, &se) || se.Kind != service.ErrNotMetadataPrimary || se.Message != "node 1 is not the metadata primary" ||
		se.Hint == nil || se.Hint.NodeID != 2 || se.Hint.Generation != 9 || se.Hint.ClientAddr != "10.0.0.2:7070" {
		t.Fatalf("NOT_PRIMARY of the metadata replica: %#v", err)
	}
	if err := metaKindErr(n.metaErr(&partition.Error{Kind: partition.ErrTimedOut, Message: "slow"})); !errors.Is(err, partition.ErrTimedOut) || err.Error() != "slow" {
		t.Fatalf("a timed-out proposal: %#v", err)
	}
}
