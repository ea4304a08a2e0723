package segment

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// IO owns one Engine and dispatches its completions to the logs that share
// it: a shard owns one IO and thousands of logs. It allocates the tokens of
// engine operations, recycles write buffers, and batches the logs' pending
// writes into one submission per event-loop iteration (group commit: many
// appends, one write and one fdatasync per log).
//
// IO is owned by one goroutine, the same that owns its logs; nothing in it
// is safe for concurrent use. The owner's loop is:
//
//	for {
//		handle requests        // log.AppendLeader / AppendFollower / Read ...
//		io.Flush()             // submit every log's pending buffer
//		block on inbox or io.WakeFd(); io.Poll()
//	}
//
// and durable acknowledgements come through the notify callback. When the
// engine completes inside Submit (pwrite), Flush delivers them itself.
type IO struct {
	eng  Engine
	pool bufPool
	// ops maps a token to its operation; nil slots are free (listed in
	// freeTokens).
	ops        []*op
	freeTokens []uint64
	opFree     []*op
	// unsubmitted counts operations queued on the engine since the last
	// Submit.
	unsubmitted int
	// dirty lists logs with a buffer to submit; lagging lists logs under
	// FsyncInterval with data not yet durable. A log is in each list at
	// most once (Log.inDirty, Log.inLagging).
	dirty, lagging []*Log
	// notifyQ lists logs whose watermarks moved since the last delivery
	// (Log.inNotify).
	notifyQ []*Log
	notify  func(*Log)
	// zeros is a read-only mapping of zeros (zero-fill writes).
	zeros  []byte
	reapFn func(token uint64, err error)
	// bg runs blocking file-system work off the owner's thread; nil when
	// the engine completes everything inside Submit (the owner then never
	// blocks on a descriptor that the worker could signal).
	bg     *background
	closed bool
	// delivering is true while notify callbacks run (they must not
	// re-enter Flush, Poll or Wait).
	delivering bool
	// syncs times the syncs the engine completes (SyncStats); bgSyncs
	// those the background worker runs (BackgroundSyncStats).
	syncs, bgSyncs SyncStats
}

// opsInFlightMax bounds the operations one IO keeps queued or in flight:
// past it, queueing another first waits for one to complete.
const opsInFlightMax = 1024

// NewIO returns a dispatcher owning e. Close closes e.
func NewIO(e Engine) *IO {
	d := &IO{eng: e, pool: bufPool{cachedBytesMax: poolCachedBytesMaxDefault}}
	d.reapFn = d.complete
	if fd := e.WakeFd(); fd >= 0 {
		d.bg = newBackground(fd)
	}
	return d
}

// SetNotify installs fn, called with a log after its WrittenOffset,
// DurableOffset or LogEndOffset (a rewind after ENOSPC) moved, or it
// failed. Calls happen on the owner goroutine from Flush, Poll, Wait and
// from appends that wait for a free write slot (or, lent, find none). fn
// may read the log's state (watermarks, Err) but must not append, read,
// flush or close anything.
func (d *IO) SetNotify(fn func(*Log)) { d.notify = fn }

// Engine returns the engine the IO owns.
func (d *IO) Engine() Engine { return d.eng }

// InFlight is the number of operations (engine and background) not yet
// reaped.
func (d *IO) InFlight() int {
	n := d.eng.InFlight()
	if d.bg != nil {
		n += d.bg.pending
	}
	return n
}

// WakeFd is the engine's completion descriptor (-1: completions are ready
// right after Flush; see Engine.WakeFd).
func (d *IO) WakeFd() int { return d.eng.WakeFd() }

// Flush submits everything the logs have pending: each dirty log's buffer
// becomes one write (linked to an fdatasync when its policy says so), and
// logs under FsyncInterval whose interval has run out are synced. Call it
// at the end of every event-loop iteration. It also reaps what has already
// completed. The error is the engine's; a log's own failure is reported
// through that log (Err, a rewound LogEndOffset, the notify callback).
func (d *IO) Flush() error {
	if d.closed {
		return ErrClosed
	}
	if _, err := d.reap(false); err != nil {
		return err
	}
	if len(d.dirty) > 0 {
		dirty := d.dirty
		d.dirty = nil
		for i, l := range dirty {
			l.inDirty = false
			l.flush()
			dirty[i] = nil
		}
		if d.dirty == nil {
			d.dirty = dirty[:0]
		}
	}
	if len(d.lagging) > 0 {
		keep := d.lagging[:0]
		for _, l := range d.lagging {
			if l.flushLagging() {
				keep = append(keep, l)
			} else {
				l.inLagging = false
			}
		}
		clear(d.lagging[len(keep):])
		d.lagging = keep
	}
	if err := d.submit(); err != nil {
		return err
	}
	_, err := d.reap(false)
	return err
}

// Poll reaps completed operations without blocking and delivers their
// notifications. It returns the number reaped.
func (d *IO) Poll() (int, error) {
	if d.closed {
		return 0, ErrClosed
	}
	return d.reap(false)
}

// Wait blocks until at least one operation completes (returning at once
// when none is in flight), reaps and delivers. It returns the number
// reaped.
func (d *IO) Wait() (int, error) {
	if d.closed {
		return 0, ErrClosed
	}
	if err := d.submit(); err != nil {
		return 0, err
	}
	if d.InFlight() == 0 {
		return 0, nil
	}
	return d.reap(true)
}

// Close closes the engine (which waits for its operations) and releases
// the buffer pool. Logs sharing the IO must be closed first.
func (d *IO) Close() error {
	if d.closed {
		return ErrClosed
	}
	// Reap what is in flight first, so every buffer and file reference
	// comes home; then close the engine.
	var err error
	for err == nil && d.InFlight() > 0 {
		if err = d.submit(); err == nil {
			_, err = d.reap(true)
		}
	}
	if d.bg != nil {
		d.bg.stop()
	}
	if cerr := d.eng.Close(); err == nil {
		err = cerr
	}
	d.closed = true
	d.pool.close()
	if d.zeros != nil {
		_ = unix.Munmap(d.zeros)
		d.zeros = nil
	}
	return err
}

// zeroChunkBytes is the size of one zero-fill write.
const zeroChunkBytes = 1 << 20

// zeroBuf returns a read-only mapping of zeros that zero-fill writes share.
func (d *IO) zeroBuf() ([]byte, error) {
	if d.zeros == nil {
		z, err := unix.Mmap(-1, 0, zeroChunkBytes, unix.PROT_READ, unix.MAP_ANON|unix.MAP_PRIVATE)
		if err != nil {
			return nil, err
		}
		d.zeros = z
	}
	return d.zeros, nil
}

func (d *IO) submit() error {
	if d.unsubmitted == 0 {
		return nil
	}
	d.unsubmitted = 0
	if err := d.eng.Submit(); err != nil {
		return fmt.Errorf("segment: %s submit: %w", d.eng.Name(), err)
	}
	return nil
}

func (d *IO) reap(wait bool) (int, error) {
	if d.delivering {
		return 0, errors.New("segment: IO re-entered from a notify callback")
	}
	n := 0
	if d.bg != nil && d.bg.pending > 0 {
		// Block on the worker only when the engine has nothing that
		// could complete instead.
		for _, j := range d.bg.take(wait && d.eng.InFlight() == 0) {
			d.complete(j.tok, j.err)
			n++
		}
		if n > 0 {
			wait = false
		}
	}
	m, err := d.eng.Reap(wait, d.reapFn)
	n += m
	d.deliver()
	if err != nil {
		return n, fmt.Errorf("segment: %s reap: %w", d.eng.Name(), err)
	}
	return n, nil
}

func (d *IO) deliver() {
	if len(d.notifyQ) == 0 {
		return
	}
	d.delivering = true
	for i := 0; i < len(d.notifyQ); i++ {
		l := d.notifyQ[i]
		l.inNotify = false
		if d.notify != nil && !l.closed {
			d.notify(l)
		}
		d.notifyQ[i] = nil
	}
	d.notifyQ = d.notifyQ[:0]
	d.delivering = false
}

// waitFor reaps (blocking) until cond holds. It fails if cond can never
// hold because nothing is in flight.
func (d *IO) waitFor(cond func() bool) error {
	for !cond() {
		if err := d.submit(); err != nil {
			return err
		}
		if d.InFlight() == 0 {
			return errors.New("segment: waiting on a log with nothing in flight")
		}
		if _, err := d.reap(true); err != nil {
			return err
		}
	}
	return nil
}

func (d *IO) markDirty(l *Log) {
	if !l.inDirty {
		l.inDirty = true
		d.dirty = append(d.dirty, l)
	}
}

func (d *IO) markLagging(l *Log) {
	if !l.inLagging {
		l.inLagging = true
		d.lagging = append(d.lagging, l)
	}
}

func (d *IO) queueNotify(l *Log) {
	if !l.inNotify {
		l.inNotify = true
		d.notifyQ = append(d.notifyQ, l)
	}
}

func (d *IO) newOp() *op {
	if n := len(d.opFree); n > 0 {
		o := d.opFree[n-1]
		d.opFree = d.opFree[:n-1]
		return o
	}
	return &op{}
}

func (d *IO) freeOp(o *op) {
	*o = op{}
	if len(d.opFree) < opsInFlightMax {
		d.opFree = append(d.opFree, o)
	}
}

// startBackground hands o's work, run, to the background worker; o
// completes by its token when run returns.
func (d *IO) startBackground(o *op, run func() error) {
	d.bg.start(d.token(o), run)
}

// token registers o and returns the token its completion will carry.
func (d *IO) token(o *op) uint64 {
	var tok uint64
	if n := len(d.freeTokens); n > 0 {
		tok = d.freeTokens[n-1]
		d.freeTokens = d.freeTokens[:n-1]
	} else {
		tok = uint64(len(d.ops))
		d.ops = append(d.ops, nil)
	}
	d.ops[tok] = o
	return tok
}

// start hands o to the engine. An operation the engine refuses completes
// at once with the refusal.
func (d *IO) start(o *op) {
	if d.eng.InFlight() >= opsInFlightMax {
		// Bounded: make room first. An error here surfaces below.
		_ = d.waitFor(func() bool { return d.eng.InFlight() < opsInFlightMax })
	}
	tok := d.token(o)
	if o.standalone || o.sync {
		o.syncStart = time.Now()
	}
	var err error
	switch {
	case o.standalone:
		err = d.eng.Sync(o.file.f, tok)
	case o.zero:
		err = d.eng.Write(o.file.f, o.data, o.pos, o.sync, tok)
	default:
		err = d.eng.Write(o.file.f, o.buf.bytes(), o.pos, o.sync, tok)
	}
	if err != nil {
		d.complete(tok, fmt.Errorf("segment: %s refused the operation: %w", d.eng.Name(), err))
		return
	}
	d.unsubmitted++
}

// complete routes one engine completion to its log.
func (d *IO) complete(tok uint64, err error) {
	if tok >= uint64(len(d.ops)) || d.ops[tok] == nil {
		panic(fmt.Sprintf("segment: completion for unknown token %d", tok))
	}
	o := d.ops[tok]
	d.ops[tok] = nil
	d.freeTokens = append(d.freeTokens, tok)
	if err == nil && !o.syncStart.IsZero() {
		d.syncs.observe(time.Since(o.syncStart))
	}
	o.log.complete(o, err)
}
