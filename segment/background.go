package segment

import (
	"sync"

	"golang.org/x/sys/unix"
)

// background runs an IO's blocking file-system work — the parts of sealing
// a segment that wait for the device (truncating the preallocated tail,
// fdatasync, the directory sync, the index files) and the removal of
// segments retention dropped — on a goroutine of its own, so that the
// shard's thread never waits for them. Each waits for the disk: a journal
// commit on ext4 with a journal; on the test machine's ext4 without one,
// a synchronous inode write per sync and, mounted with discard, a discard
// of every freed block (a trim was seen waiting 719 ms, an unlink of 1 GiB
// 0.2 s). Single rolls had blocked a shard for 88-627 ms on three nodes
// sharing one disk, every partition of the shard with it.
//
// Jobs run one at a time in the order started. A finished job is listed
// and the engine's completion eventfd is written, so the owner, which
// blocks on that descriptor, reaps it with the engine's completions
// (IO.reap); it then completes like an engine operation, by its token.
type background struct {
	wakeFd int
	jobs   chan bgJob
	exited chan struct{}

	mu   sync.Mutex
	cond *sync.Cond
	done []bgDone

	// pending counts jobs started and not yet reaped (owner only).
	pending int
}

type bgJob struct {
	tok uint64
	run func() error
}

type bgDone struct {
	tok uint64
	err error
}

// bgQueueMax bounds the jobs queued to the worker (at most one seal per
// log, plus retention's removals); past it the owner waits for room.
const bgQueueMax = 256

func newBackground(wakeFd int) *background {
	b := &background{wakeFd: wakeFd, jobs: make(chan bgJob, bgQueueMax), exited: make(chan struct{})}
	b.cond = sync.NewCond(&b.mu)
	go b.work()
	return b
}

func (b *background) work() {
	defer close(b.exited)
	one := [8]byte{1}
	for j := range b.jobs {
		err := j.run()
		b.mu.Lock()
		b.done = append(b.done, bgDone{tok: j.tok, err: err})
		b.cond.Signal()
		b.mu.Unlock()
		// Native-endian 1: the kernel adds it to the counter.
		_, _ = unix.Write(b.wakeFd, one[:])
	}
}

// start queues run under token tok.
func (b *background) start(tok uint64, run func() error) {
	b.pending++
	b.jobs <- bgJob{tok: tok, run: run}
}

// take returns the finished jobs, first waiting for one when block is set
// and some are pending.
func (b *background) take(block bool) []bgDone {
	b.mu.Lock()
	defer b.mu.Unlock()
	for block && len(b.done) == 0 && b.pending > 0 {
		b.cond.Wait()
	}
	d := b.done
	b.done = nil
	b.pending -= len(d)
	return d
}

// stop ends the worker once the queued jobs ran.
func (b *background) stop() {
	close(b.jobs)
	<-b.exited
}
