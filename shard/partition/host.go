package partition

import (
	"fmt"
	"time"

	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/vfs"
	"github.com/corestream/corestream/shard"
	"golang.org/x/sys/unix"
)

// Host is the per-shard home of replicas: it owns the shard's write IO and
// connects it to them. Appends of a round are flushed once at its end
// (group commit across partitions), engine completions are reaped when the
// engine's eventfd fires, and every replica's consensus clock ticks from
// one shard timer. All methods run on the shard's thread.
type Host struct {
	sh      *shard.Shard
	io      *segment.IO
	byLog   map[*segment.Log]*Replica
	byKey   map[[20]byte]*Replica
	byGroup map[raftlite.GroupID]*Replica
	// flushQueued says an IO flush is deferred to the end of this round.
	flushQueued bool
	tickEvery   time.Duration
	ticker      *shard.Timer
	wakeFd      int
	// periodic flushes drive the interval fsync policy when idle.
	flushEvery time.Duration
	flusher    *shard.Timer
	closed     bool
	// journal is the shard's hard-state journal (nil: per-replica files);
	// states are the hard states loaded from every journal at start.
	journal       *journal
	states        map[raftlite.GroupID]raftlite.HardState
	journalQueued bool
}

// UseJournal makes the replicas opened from now on keep their terms and
// votes in this shard's journal in dir (one fdatasync per round for all of
// them), starting from states (LoadHardStates of every shard's journal).
// REQUIRES: on the shard's thread, before the first Open.
func (h *Host) UseJournal(fsys vfs.FS, dir string, states map[raftlite.GroupID]raftlite.HardState) error {
	j, err := openJournal(fsys, dir, h.sh.ID())
	if err != nil {
		return err
	}
	h.journal, h.states = j, states
	return nil
}

// requestJournalSync makes the journal sync at the end of this round.
func (h *Host) requestJournalSync() {
	if h.journalQueued || h.closed {
		return
	}
	h.journalQueued = true
	h.sh.Defer(func() {
		h.journalQueued = false
		h.journal.sync(func(g raftlite.GroupID) bool { return h.byGroup[g] != nil })
	})
}

// NewHost creates the host of shard sh around engine eng. tick is the
// consensus tick (cluster.heartbeat_interval_ms); flushEvery, when
// positive, flushes the IO periodically (the interval fsync policy).
// REQUIRES: on sh's thread.
func NewHost(sh *shard.Shard, eng segment.Engine, tick, flushEvery time.Duration) (*Host, error) {
	h := &Host{sh: sh, io: segment.NewIO(eng), byLog: map[*segment.Log]*Replica{},
		byKey: map[[20]byte]*Replica{}, byGroup: map[raftlite.GroupID]*Replica{},
		tickEvery: tick, flushEvery: flushEvery, wakeFd: eng.WakeFd()}
	h.io.SetNotify(func(l *segment.Log) {
		if r := h.byLog[l]; r != nil {
			r.LogProgress()
		}
	})
	if h.wakeFd >= 0 {
		if err := sh.Watch(h.wakeFd, unix.EPOLLIN, func(uint32) { h.poll() }); err != nil {
			return nil, fmt.Errorf("partition: watching the engine: %w", err)
		}
	}
	h.ticker = sh.AfterFunc(tick, h.tick)
	if flushEvery > 0 {
		h.flusher = sh.AfterFunc(flushEvery, h.periodicFlush)
	}
	return h, nil
}

// IO is the shard's write dispatcher.
func (h *Host) IO() *segment.IO { return h.io }

// Shard is the owning shard.
func (h *Host) Shard() *shard.Shard { return h.sh }

// Open opens a replica on this shard; cfg.IO, cfg.Sched and the flush
// hook are filled in.
func (h *Host) Open(cfg Config) (*Replica, error) {
	cfg.IO, cfg.Sched = h.io, h.sh
	cfg.onAppend = h.RequestFlush
	// A fenced replica (fence.go) leaves the host after this round, so
	// that the node's next reconciliation opens it again and records the
	// refusal as an open failure.
	cfg.onFenced = func(r *Replica) {
		h.sh.Defer(func() {
			if h.byKey[r.key] == r {
				_ = h.CloseReplica(r.key, r.failure)
			}
		})
	}
	if h.journal != nil {
		cfg.jrnl, cfg.syncJournal = h.journal, h.requestJournalSync
		cfg.initial = h.states[GroupID(shard.PartitionKey(cfg.TopicID, uint32(cfg.Partition)))]
	}
	key := shard.PartitionKey(cfg.TopicID, uint32(cfg.Partition))
	if h.byKey[key] != nil {
		return nil, fmt.Errorf("partition: %s/%d is already open on shard %d", cfg.Topic, cfg.Partition, h.sh.ID())
	}
	r, err := Open(cfg)
	if err != nil {
		return nil, err
	}
	h.byLog[r.log] = r
	h.byKey[key] = r
	h.byGroup[GroupID(key)] = r
	h.RequestFlush()
	return r, nil
}

// Get returns the replica with key, or nil.
func (h *Host) Get(key [20]byte) *Replica { return h.byKey[key] }

// Group returns the replica of consensus group g, or nil.
func (h *Host) Group(g raftlite.GroupID) *Replica { return h.byGroup[g] }

// Each calls fn for every open replica.
func (h *Host) Each(fn func(*Replica)) {
	for _, r := range h.byKey {
		fn(r)
	}
}

// Len is the number of open replicas.
func (h *Host) Len() int { return len(h.byKey) }

// CloseReplica closes the replica with key (its waiting requests get err).
func (h *Host) CloseReplica(key [20]byte, err error) error {
	return h.closeReplica(key, err, (*segment.Log).Close)
}

// DropReplica closes the replica with key like CloseReplica but discards
// its log (segment.Log.Discard): for a deleted partition whose directory
// goes next.
func (h *Host) DropReplica(key [20]byte, err error) error {
	return h.closeReplica(key, err, (*segment.Log).Discard)
}

func (h *Host) closeReplica(key [20]byte, err error, closeLog func(*segment.Log) error) error {
	r := h.byKey[key]
	if r == nil {
		return nil
	}
	delete(h.byKey, key)
	delete(h.byGroup, GroupID(key))
	log := r.log
	cerr := r.close(err, closeLog)
	delete(h.byLog, log)
	return cerr
}

// AnswerFetches answers every long poll waiting on this shard's replicas
// now (Replica.AnswerFetches).
func (h *Host) AnswerFetches() {
	for _, r := range h.byKey {
		r.AnswerFetches()
	}
}

// RequestFlush makes the IO flush at the end of this round (once).
func (h *Host) RequestFlush() {
	if h.flushQueued || h.closed {
		return
	}
	h.flushQueued = true
	h.sh.Defer(h.flush)
}

func (h *Host) flush() {
	h.flushQueued = false
	if h.closed {
		return
	}
	if err := h.io.Flush(); err != nil {
		// An engine failure: every log with writes in flight learns it
		// through its own state; nothing more to do here.
		_ = err
	}
}

func (h *Host) poll() {
	if !h.closed {
		_, _ = h.io.Poll()
	}
}

func (h *Host) tick() {
	if h.closed {
		return
	}
	for _, r := range h.byKey {
		if r.raft != nil && r.raft.Quiesced() {
			continue // an idle group costs nothing per tick
		}
		r.Tick()
	}
	h.sh.Reset(h.ticker, h.tickEvery)
}

func (h *Host) periodicFlush() {
	if h.closed {
		return
	}
	h.flush()
	h.sh.Reset(h.flusher, h.flushEvery)
}

// Close closes every replica (their waiting requests get err) and the IO.
func (h *Host) Close(err error) error { return h.close(err, (*segment.Log).Close) }

// Stop closes like Close for a stop of the whole node: every log is closed
// into stop (segment.Log.CloseInto), whose Commit, once every shard has
// stopped, makes them durable and clean together.
func (h *Host) Stop(stop *segment.StopRecord) error {
	return h.close(nil, func(l *segment.Log) error { return l.CloseInto(stop) })
}

func (h *Host) close(err error, closeLog func(*segment.Log) error) error {
	if h.closed {
		return nil
	}
	var first error
	for key := range h.byKey {
		if cerr := h.closeReplica(key, err, closeLog); cerr != nil && first == nil {
			first = cerr
		}
	}
	h.closed = true
	h.sh.Stop(h.ticker)
	if h.flusher != nil {
		h.sh.Stop(h.flusher)
	}
	if h.wakeFd >= 0 {
		_ = h.sh.Unwatch(h.wakeFd)
	}
	if cerr := h.io.Close(); cerr != nil && first == nil {
		first = cerr
	}
	if h.journal != nil {
		if len(h.journal.held) > 0 || len(h.journal.buf) > 0 {
			h.journal.sync(func(raftlite.GroupID) bool { return true })
		}
		if cerr := h.journal.close(); cerr != nil && first == nil {
			first = cerr
		}
	}
	return first
}
