package partition

import (
	"errors"
	"testing"

	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/vfs"
)

// A primary does not know the high watermark until an entry of its own
// term commits (the no-op it appends on election). Before that its commit
// offset is whatever it restarted with — -1 after a restart — and a read
// answered then would show an old, lower high watermark: a "latest" offset
// that goes back, a consumer told it reached the end early, or told that
// the generation of the records it read ends at the old high watermark
// (OffsetForLeaderEpoch), which a Kafka consumer takes for a truncation
// and answers by reading the log again from its start. Reads are
// refused with the retriable PRIMARY_NOT_AVAILABLE until then; produces
// are accepted (they commit after the no-op).
func TestReadsWaitForTheFirstCommitOfTheTerm(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, vfs.OS(), dir)
	r := e.open(segment.FsyncAlways)
	for i := 0; i < 3; i++ {
		if res := e.produce(r, mkBatch(t, 2, -1, 0, int32(i)), acksQuorum); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	e.stop()

	e = newEnv(t, vfs.OS(), dir)
	var (
		listErr, fetchErr, epochErr error
		primary                     bool
		epochEnd                    int64
		fetched                     FetchResult
	)
	e.do(func() {
		// In the turn that opens the replica, the group of one has elected
		// itself but its no-op is not yet written, let alone committed.
		var err error
		r, err = e.host.Open(Config{DenseOffsets: true, FS: vfs.OS(), Dir: dir + "/p0", Log: segment.Config{Fsync: segment.FsyncAlways, BatchBytesMax: 1 << 20},
			Topic: "t", TopicID: [16]byte{1}, Partition: 0, Self: 1, Replicas: []raftlite.NodeID{1}})
		if err != nil {
			t.Fatal(err)
		}
		primary = r.IsPrimary()
		_, listErr = r.ListOffsets(GenerationUnknown, TimestampLatest)
		_, epochEnd, epochErr = r.EndOfGeneration(GenerationUnknown, r.term-1)
		r.Fetch(&FetchArgs{Generation: GenerationUnknown, Offset: 0, MaxBytes: 1 << 20}, func(res FetchResult) {
			fetchErr = res.Err
			fetched = res
		})
	})
	segment.ReleaseSpans(fetched.Spans)
	if !primary {
		t.Skip("the replica was not primary in its first turn; nothing to check")
	}
	var er *Error
	if !errors.Is(listErr, ErrPrimaryNotAvailable) || !errors.As(listErr, &er) || er.RetryAfterMs == 0 {
		t.Fatalf("list offsets before the term's first commit: %v (high watermark %d)", listErr, fetched.HighWatermark)
	}
	if !errors.Is(fetchErr, ErrPrimaryNotAvailable) {
		t.Fatalf("fetch before the term's first commit: %v (high watermark %d)", fetchErr, fetched.HighWatermark)
	}
	if !errors.Is(epochErr, ErrPrimaryNotAvailable) {
		t.Fatalf("the end of the last generation before the term's first commit: %d, %v", epochEnd, epochErr)
	}
	e.waitPrimary(r)
	var lo Offsets
	var err error
	e.do(func() {
		lo, err = r.ListOffsets(GenerationUnknown, TimestampLatest)
	})
	// Three batches of two; neither no-op takes an offset.
	if err != nil || lo.Offset != 6 {
		t.Fatalf("latest once the no-op committed: %+v %v", lo, err)
	}
	var g, last int32
	e.do(func() {
		last = r.term - 1
		g, epochEnd, err = r.EndOfGeneration(GenerationUnknown, last)
	})
	if err != nil || g != last || epochEnd != 6 {
		t.Fatalf("the end of the last generation once the no-op committed: generation %d, end %d, %v; want %d, 6", g, epochEnd, err, last)
	}
}
