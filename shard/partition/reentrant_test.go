package partition

import (
	"testing"
	"time"

	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/vfs"
)

// TestProduceFromReplyIsAnswered produces a chain of batches, each from
// inside the previous one's reply, at both acknowledgement levels, and
// wants each answered with its own offset before its timeout. A reply
// that produced again once lost the new waiter: complete stored a stale
// copy of the queue back over the one the new produce appended to.
func TestProduceFromReplyIsAnswered(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fsync segment.FsyncPolicy
		acks  bool
	}{
		{"quorum fsync always", segment.FsyncAlways, acksQuorum},
		{"quorum fsync never", segment.FsyncNever, acksQuorum},
		{"primary fsync always", segment.FsyncAlways, acksPrimary},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, vfs.OS(), t.TempDir())
			r := e.open(tc.fsync)
			const depth = 4
			// Long enough for a loaded machine, shorter than the wait
			// below: a lost waiter shows as a timed-out produce.
			const timeout = 10 * time.Second
			type answer struct {
				i   int
				res ProduceResult
			}
			answers := make(chan answer, depth)
			batches := make([][]byte, depth)
			for i := range batches {
				batches[i] = mkBatch(t, 1, -1, 0, int32(i))
			}
			var chain func(i int)
			chain = func(i int) {
				if i == depth {
					return
				}
				r.Produce(&ProduceArgs{Generation: GenerationUnknown, AcksPrimary: tc.acks, Timeout: timeout, Records: batches[i]},
					func(res ProduceResult) {
						answers <- answer{i, res}
						if res.Err == nil {
							chain(i + 1) // from inside this produce's reply
						}
					})
			}
			e.do(func() { chain(0) })
			deadline := time.After(timeout + 5*time.Second)
			for want := 0; want < depth; want++ {
				select {
				case a := <-answers:
					// The new primary's no-op takes no offset.
					if a.i != want || a.res.Err != nil || a.res.Produced.BaseOffset != int64(want) {
						t.Fatalf("produce %d answered offset %d, %v; want produce %d answered offset %d", a.i, a.res.Produced.BaseOffset, a.res.Err, want, want)
					}
				case <-deadline:
					t.Fatalf("produce %d (made from inside produce %d's reply) was never answered", want, want-1)
				}
			}
		})
	}
}
