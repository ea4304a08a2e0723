package partition

import (
	"testing"

	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/vfs"
)

// TestRaftLogTail appends far more batches than the tail keeps and checks
// that the tail stays bounded, that entries served from it match those
// scanned from the segment files, and that ranges below it are scanned.
func TestRaftLogTail(t *testing.T) {
	mem := vfs.NewMem()
	if err := mem.MkdirAll("p", 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := segment.OpenLog(mem, "p", segment.Config{Fsync: segment.FsyncNever}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r := &raftLog{log: l}
	const n = 3*tailEntriesMax + 17
	for i := 0; i < n; i++ {
		b := mkBatch(t, 1+i%3, -1, 0, int32(i))
		base, last, err := l.AppendLeader(b, 1)
		if err != nil {
			t.Fatal(err)
		}
		r.appended(raftlite.Entry{Base: base, Last: last, Term: 1, Bytes: int32(len(b))})
		if i%100 == 0 {
			if err := l.IO().Flush(); err != nil {
				t.Fatal(err)
			}
		}
		if len(r.tail) > 2*tailEntriesMax+1 {
			t.Fatalf("after %d appends the tail holds %d entries, bound %d", i+1, len(r.tail), 2*tailEntriesMax)
		}
	}
	if err := l.IO().Flush(); err != nil {
		t.Fatal(err)
	}
	if r.tail[len(r.tail)-1].Last != l.LogEndOffset()-1 || r.tail[0].Base <= 0 {
		t.Fatalf("tail [%d..%d], log end %d: want the newest entries only", r.tail[0].Base, r.tail[len(r.tail)-1].Last, l.LogEndOffset())
	}
	end := l.LogEndOffset()
	for _, lo := range []int64{0, r.tail[0].Base - 1, r.tail[0].Base, r.tail[len(r.tail)/2].Base + 1, end - 1} {
		got, err := r.Entries(lo, end, 1<<40, nil)
		if err != nil {
			t.Fatalf("Entries(%d): %v", lo, err)
		}
		want, err := r.scan(lo, end, 1<<40, nil)
		if err != nil {
			t.Fatalf("scan(%d): %v", lo, err)
		}
		if len(got) == 0 || len(got) != len(want) {
			t.Fatalf("Entries(%d) gave %d entries, the files %d", lo, len(got), len(want))
		}
		for i := range got {
			if got[i].Base != want[i].Base || got[i].Last != want[i].Last || got[i].Bytes != want[i].Bytes || got[i].Term != want[i].Term {
				t.Fatalf("Entries(%d)[%d] = %+v, files %+v", lo, i, got[i], want[i])
			}
		}
		if got[0].Base > lo || got[0].Last < lo {
			t.Fatalf("Entries(%d) starts at [%d..%d]", lo, got[0].Base, got[0].Last)
		}
	}
}
