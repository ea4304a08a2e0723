package partition

import (
	"errors"
	"fmt"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/segment/vfs"
	"github.com/corestream/corestream/shard"
)

// Scheduler is the part of the owning shard a replica uses: timers and
// end-of-round work. *shard.Shard satisfies it.
type Scheduler interface {
	AfterFunc(d time.Duration, fn func()) *shard.Timer
	Stop(t *shard.Timer) bool
	Defer(fn func())
}

// Config describes one replica.
type Config struct {
	FS  vfs.FS
	Dir string
	// DenseOffsets makes the consensus group's own entries (the primary's
	// no-op, configuration entries) zero-width, so that the records'
	// offsets, which clients see, run dense from 0 (docs/design/offsets.md):
	// set for every partition clients read. The node's internal logs
	// (metadata, groups), whose readers work in raft offsets, leave it
	// off: there each entry takes one offset and the two spaces agree.
	DenseOffsets bool
	// FenceAlsoRemove are paths outside Dir that hold state derived from
	// the log (the metadata group's snapshot): a fenced replica's message
	// tells the operator to remove them with Dir (fence.go). None by
	// default.
	FenceAlsoRemove []string
	// Log configures the segment log; IO is the owning shard's dispatcher.
	Log segment.Config
	// MaxMessageBytes bounds a produced batch (the topic's
	// max.message.bytes), in place of Log.BatchBytesMax, below or above
	// it as Kafka's topic override is; 0: Log.BatchBytesMax. The log
	// itself still refuses a batch over Log.BatchBytesMax, so a replica
	// whose topic may raise its bound opens its log with the format's
	// batch.BatchBytesMax. Only produce checks it: a follower appends
	// what its primary accepted, also after the bound was changed.
	MaxMessageBytes int
	IO              *segment.IO
	// Sched is the owning shard.
	Sched Scheduler
	// Topic, TopicID and Partition name the partition.
	Topic     string
	TopicID   [16]byte
	Partition int32
	// Self is this node; Replicas is the replica set, preferred primary first.
	Self     raftlite.NodeID
	Replicas []raftlite.NodeID
	// Learners are the learners of the configuration Replicas belong to:
	// none for a partition's replica at creation; a replica opened on a
	// node added to a running group (Replica.AddLearner on the primary)
	// has Replicas the voters and Learners the learners of the entry that
	// added it, itself among the Learners. Once the log holds a
	// configuration entry, that one is in force (restarts included).
	Learners []raftlite.NodeID
	// Limits are the consensus timing and flow-control bounds (shared).
	Limits *raftlite.Limits
	// Send carries this group's messages to peers; nil on a single node.
	// MsgApp entries with nil Data refer to this replica's log (ReadSpans).
	Send func(r *Replica, msgs []raftlite.Message)
	// OnRoute runs when the primary or the generation changes.
	OnRoute func(r *Replica)
	// OnCommit runs when the commit offset moves, before the produce
	// requests it covers are answered (the metadata group applies its
	// commands here, so a proposer's answer can carry the result), and
	// again whenever the log's written offset moves: a follower can learn
	// a commit before its own copy of the entries is readable.
	OnCommit func(r *Replica, commit int64)
	// OnReset runs after the log was replaced by one starting at start
	// (the leader no longer held the entries this replica needed), with
	// the state-machine snapshot the leader attached (metadata group).
	OnReset func(r *Replica, start int64, snapshot []byte)
	// OnStorageFull runs when a write found no space and the log went
	// back (the replica restarts; writes fail until space returns), with
	// the cause, so that the node says so. Nil: nothing to do.
	OnStorageFull func(r *Replica, cause error)
	// OnStorageFailed runs when the log failed for good (an I/O error on
	// a write, a failed fdatasync: segment.ErrLogFailed) and the replica
	// restarts from what is on disk, with the cause, so that the node
	// says so. Nil: nothing to do.
	OnStorageFailed func(r *Replica, cause error)
	// OnConf runs when the configuration in force changed (a membership
	// change appended or truncated, a reset): start serving a member
	// added, stop routing to one removed. Nil: nothing to do.
	OnConf func(r *Replica, conf raftlite.Membership)
	// NowMs is the wall clock (log append times).
	NowMs func() int64
	// Throttle, when set, bounds the catch-up bytes this replica sends
	// to learners while it leads (throttle.go; shared by the node).
	Throttle *Throttle
	// SendSegment carries one chunk of a sealed segment to a learner far
	// behind (catch-up by whole segments, segcatch.go); the chunk's Span
	// is the sender's to release. AnswerSegment carries a follower's
	// answer back to the primary. Nil SendSegment: appends only.
	SendSegment   func(r *Replica, c *SegmentChunk)
	AnswerSegment func(r *Replica, to raftlite.NodeID, a SegmentAnswer)
	// Alive reports whether a peer is believed up; nil means always. A
	// primary that cannot reach a majority of its replicas refuses writes
	// with ErrNotEnoughReplicas instead of letting them time out.
	Alive func(raftlite.NodeID) bool
	// onAppend is called after entries are appended (the host flushes
	// the IO at the end of the round).
	onAppend func()
	// jrnl is the shard's hard-state journal (nil: a per-replica
	// checkpoint file); syncJournal asks the host to sync it at the end
	// of the round; initial is the state loaded from every journal.
	syncJournal func()
	initial     raftlite.HardState
	jrnl        *journal
	// onFenced tells the host that the replica fenced itself (fence.go);
	// nil: nothing to tell.
	onFenced func(r *Replica)
}

// Errors of a replica's control calls (Step, TransferLeadership, ...);
// requests are answered with the kinds in errors.go.
var (
	// ErrClosed is returned once the replica is closed.
	ErrClosed = errors.New("partition: closed")
)

// produceTimeoutDefault applies when a produce asks for no timeout.
const produceTimeoutDefault = 30 * time.Second

// Replica is one partition replica. All methods run on the owning shard.
type Replica struct {
	cfg  Config
	key  [20]byte
	log  *segment.Log
	rlog *raftLog
	raft *raftlite.Node
	prod *producers
	// txns is the open and aborted transactions (txns.go), kept with
	// prod from every batch appended and rebuilt with it.
	txns *txnState
	// commit is the consensus commit offset (inclusive); the high
	// watermark is commit+1. Invariant: never decreases while the replica
	// is open.
	commit int64
	// recordsStart is the (user) log start the partition's DeleteRecords
	// set (SetRecordsStart; 0: none): the records below it are gone for
	// every reader though their segment may still hold them. Invariant:
	// never decreases while the replica is open.
	recordsStart int64
	// cleaner is the topic's log cleaner settings; nil unless compacted.
	cleaner *segment.CleanConfig
	// acked is the highest offset durable here under the fsync policy
	// already reported to raft.
	acked int64
	// leader and term are the route clients see.
	leader raftlite.NodeID
	term   int32
	// quorumQ and primaryQ hold produce requests waiting for the commit
	// (acks=quorum) or the local write (acks=primary), in offset order.
	quorumQ, primaryQ []*pendingProduce
	// waiters are long-poll fetches waiting for the commit to move.
	waiters []*fetchWaiter
	// progressDeferred says a log-progress pass is queued for this round.
	progressDeferred bool
	closed           bool
	// held is the Ready waiting for the hard-state journal's sync.
	held *raftlite.Ready
	// holdTicks delays a non-preferred replica's election clock after it
	// opens, so the preferred primary (which campaigns after one tick)
	// wins even when the other replicas open first.
	holdTicks int32
	// failure is set while the replica cannot serve (its log failed and
	// could not be reopened); requests get ErrStorage.
	failure error
	// confQ is the membership change waiting for its commit (at most one:
	// raftlite takes one at a time), promoteQ a promotion waiting for its
	// learner to catch up; never both.
	confQ    *pendingConf
	promoteQ *pendingPromote
	// checked is the batch the running Produce validated, CRC included,
	// while that call lasts: appendEntries appends it without computing
	// the CRC again.
	checked []byte
	// lend lends the log the memory of checked (ProduceArgs.Lend), for
	// the same while; nil when the caller cannot.
	lend segment.Lend
	// checkedAppends counts the batches appended without a second CRC
	// (tests: the produce path must compute it once).
	checkedAppends int64
	// confData is the batch of this primary's newest configuration entry,
	// ending at confDataAt, for the appends that carry it first
	// (fillConfData).
	confData   []byte
	confDataAt int64
	// seg is catch-up by whole segments (segcatch.go).
	seg segCatchUp
}

// GroupID derives a consensus group id from the partition's key.
func GroupID(key [20]byte) raftlite.GroupID { return raftlite.GroupID(xxhash.Sum64(key[:])) }

// Open opens (or creates) the replica's log and consensus state.
func Open(cfg Config) (*Replica, error) {
	if cfg.NowMs == nil {
		cfg.NowMs = func() int64 { return time.Now().UnixMilli() }
	}
	r := &Replica{cfg: cfg, key: shard.PartitionKey(cfg.TopicID, uint32(cfg.Partition)), commit: -1, acked: -1}
	if err := cfg.FS.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("partition: %w", err)
	}
	if err := checkFence(&cfg); err != nil {
		return nil, err
	}
	if err := r.openLog(); err != nil {
		return nil, err
	}
	if err := r.startRaft(); err != nil {
		r.log.Close()
		return nil, err
	}
	r.process()
	return r, nil
}

func (r *Replica) openLog() error {
	l, err := segment.OpenLog(r.cfg.FS, r.cfg.Dir, r.cfg.Log, r.cfg.IO)
	if err != nil {
		return fmt.Errorf("partition %s/%d: %w", r.cfg.Topic, r.cfg.Partition, err)
	}
	r.log = l
	r.rlog = &raftLog{log: l}
	return nil
}

// startRaft builds the consensus node from the log as it is on disk now.
func (r *Replica) startRaft() error {
	// raftlite treats every entry of the log it starts from as durable.
	if err := r.log.Sync(); err != nil {
		return fmt.Errorf("partition %s/%d: sync before start: %w", r.cfg.Topic, r.cfg.Partition, err)
	}
	hs, err := loadHardState(r.cfg.FS, r.cfg.Dir)
	if err != nil {
		return err
	}
	if newer(r.cfg.initial, hs) {
		hs = r.cfg.initial
	}
	if j := r.cfg.jrnl; j != nil {
		switch live := j.live[GroupID(r.key)]; {
		case newer(live, hs):
			// A restart after an error: the journal has moved on since Open.
			hs = live
		case hs.Term > 0 && live != hs:
			// Recorded elsewhere (the legacy file, or another shard's
			// journal before the shard count changed): keep it in this
			// shard's journal, which compaction may otherwise leave
			// without it.
			j.put(GroupID(r.key), hs)
			r.cfg.syncJournal()
		}
	}
	set := raftlite.NewReplicaSet(r.cfg.Replicas...)
	learners := raftlite.NewReplicaSet(r.cfg.Learners...)
	preferred := len(r.cfg.Replicas) > 0 && r.cfg.Replicas[0] == r.cfg.Self && !learners.Has(r.cfg.Self) && r.voterInLog()
	// A member of a group of two that returns (it voted before: a
	// restart) is needed for every election: it campaigns after one tick
	// like the preferred replica instead of holding, so that the group
	// elects as soon as it is back rather than at the other member's next
	// election timeout, up to two timeouts later. Pre-vote keeps this from
	// disturbing a leader it has not heard from yet.
	returning := hs.Term > 0 && len(r.cfg.Replicas) == 2
	node, err := raftlite.New(raftlite.Config{
		ID: r.cfg.Self, Group: GroupID(r.key), Replicas: set, Learners: learners, Log: r.rlog, HardState: hs,
		Seed:          xxhash.Sum64(append(r.key[:], byte(r.cfg.Self))),
		Preferred:     preferred || returning,
		Limits:        r.cfg.Limits,
		LearnerBudget: r.learnerBudget(),
		// Under every policy but always a power loss can take
		// acknowledged entries: a group that lost committed ones fences
		// this replica (fence.go) instead of failing the node.
		LogLosesAcked: losesAcked(r.cfg.Log),
	})
	if err != nil {
		return fmt.Errorf("partition %s/%d: %w", r.cfg.Topic, r.cfg.Partition, err)
	}
	r.raft = node
	r.commit = max(r.commit, node.Commit())
	r.acked = r.log.LogEndOffset() - 1
	if err := r.rebuildProducers(); err != nil {
		return err
	}
	if node.Membership().Voters == raftlite.NewReplicaSet(r.cfg.Self) {
		// A group of one needs no election timeout to find its leader.
		node.Campaign()
	} else if !preferred && !returning {
		lim := r.cfg.Limits
		if lim == nil {
			lim = raftlite.DefaultLimits()
		}
		r.holdTicks = 3 * lim.ElectionTicks
	}
	return nil
}

// Key is the partition's ownership key.
func (r *Replica) Key() [20]byte { return r.key }

// Log is the replica's segment log (read-only use by the node layer).
func (r *Replica) Log() *segment.Log { return r.log }

// Raft is the replica's consensus node (status, transfers).
func (r *Replica) Raft() *raftlite.Node { return r.raft }

// Config is the replica's configuration.
func (r *Replica) Config() *Config { return &r.cfg }

// Route is the current primary (raftlite.None when unknown) and generation.
func (r *Replica) Route() (raftlite.NodeID, int32) { return r.leader, r.term }

// HighWatermark is commit+1: the first offset not yet visible to consumers.
func (r *Replica) HighWatermark() int64 { return r.log.UserOffset(r.commit + 1) }

// CommitEnd is the raft offset after the last committed entry: the high
// watermark in raft offsets, for the node's own readers of its internal
// logs, which work in raft offsets (docs/design/offsets.md).
func (r *Replica) CommitEnd() int64 { return r.commit + 1 }

// IsPrimary reports whether this replica leads and accepts writes now.
func (r *Replica) IsPrimary() bool {
	return r.raft != nil && r.raft.Role() == raftlite.RoleLeader && r.raft.Transferee() == raftlite.None
}

// Tick advances the consensus clock by one tick.
func (r *Replica) Tick() {
	if r.closed || r.raft == nil {
		return
	}
	if r.holdTicks > 0 && r.raft.Role() != raftlite.RoleLeader {
		r.holdTicks--
		return
	}
	r.raft.Tick()
	r.process()
	r.tickSegments()
}

// Step delivers a message from a peer.
func (r *Replica) Step(m raftlite.Message) error {
	if r.closed || r.raft == nil {
		return ErrClosed
	}
	err := r.raft.Step(m)
	if errors.Is(err, raftlite.ErrCommittedLost) {
		return r.fence(err)
	}
	r.process()
	r.tryPromote()
	return err
}

// Unquiesce wakes a quiesced group (a member's node went down: its
// election timers must run again).
func (r *Replica) Unquiesce() {
	if r.closed || r.raft == nil || !r.raft.Quiesced() {
		return
	}
	r.raft.Unquiesce()
	r.process()
}

// ForgetLeader tells the replica that its primary's node is down: it
// stops honouring that primary's lease, so it grants a live replica's
// vote at once instead of an election timeout later
// (raftlite.Node.ForgetLeader).
func (r *Replica) ForgetLeader() {
	if r.closed || r.raft == nil {
		return
	}
	r.raft.ForgetLeader()
	r.process()
}

// Campaign starts an election now (the node layer knows the primary's node
// is down and this replica is first in line to replace it). Pre-vote keeps
// it harmless when the primary is in fact alive and heard by a quorum.
func (r *Replica) Campaign() {
	if r.closed || r.raft == nil || r.raft.Role() == raftlite.RoleLeader {
		return
	}
	r.holdTicks = 0
	r.raft.Campaign()
	r.process()
}

// HasMember reports whether node id is a member (voter or learner) of the
// configuration in force.
func (r *Replica) HasMember(id raftlite.NodeID) bool { return r.Membership().Members().Has(id) }

// SetMaxMessageBytes changes the produce bound (Config.MaxMessageBytes)
// at run time (a topic config change).
func (r *Replica) SetMaxMessageBytes(n int) { r.cfg.MaxMessageBytes = n }

// SetRecordsStart moves the partition's log start up to the (user)
// offset off, which the metadata holds for every replica (Kafka's
// DeleteRecords); an offset at or below the current one changes
// nothing.
func (r *Replica) SetRecordsStart(off int64) {
	r.recordsStart = max(r.recordsStart, off)
}

// StartOffset is the partition's first readable (user) offset: the
// log's own, or the start DeleteRecords set when above it. On a replica
// whose log does not reach that start yet (a follower behind) it is the
// log's end, which rises to the start as the log catches up.
func (r *Replica) StartOffset() int64 {
	start := r.log.UserStartOffset()
	if r.recordsStart > start {
		start = max(start, min(r.recordsStart, r.log.UserEndOffset()))
	}
	return start
}

// SetRetention changes the log's retention bounds at run time (a topic
// config change); Config().Log keeps them too, for a reopen.
func (r *Replica) SetRetention(bytes, ms int64) {
	r.cfg.Log.RetentionBytes, r.cfg.Log.RetentionMs = bytes, ms
	if r.log != nil {
		r.log.SetRetention(bytes, ms)
	}
}

// SetSegmentRoll changes when the log's active segment rolls (a topic's
// segment.bytes and segment.ms) at run time; Config().Log keeps them too,
// for a reopen and the segment catch-up's plan. Out-of-range values are
// segment.ErrConfig, and nothing changes.
func (r *Replica) SetSegmentRoll(bytes, ms int64) error {
	if r.log != nil {
		if err := r.log.SetSegmentRoll(bytes, ms); err != nil {
			return err
		}
	}
	r.cfg.Log.SegmentBytes, r.cfg.Log.SegmentMs = bytes, ms
	return nil
}

// ApplyRetention deletes whole old segments past the log's retention
// bounds, never one holding an offset that is not both committed and
// durable here (a follower's log start moves only that far).
func (r *Replica) ApplyRetention() (segment.RetentionResult, error) {
	if r.closed || r.raft == nil {
		return segment.RetentionResult{}, ErrClosed
	}
	if r.recordsStart > 0 {
		// The whole segments below the start DeleteRecords set go too,
		// as on Kafka; the one holding the start is kept.
		return r.log.ApplyRetentionBelow(min(r.commit, r.acked), r.log.RaftOffset(r.recordsStart))
	}
	return r.ApplyRetentionUpTo(r.commit)
}

// ApplyRetentionUpTo is ApplyRetention that also keeps every offset above
// limit (the metadata group compacts only what its snapshot covers).
func (r *Replica) ApplyRetentionUpTo(limit int64) (segment.RetentionResult, error) {
	if r.closed || r.raft == nil {
		return segment.RetentionResult{}, ErrClosed
	}
	return r.log.ApplyRetention(min(limit, r.commit, r.acked))
}

// ApplyRetentionBelow is ApplyRetention that also deletes every whole
// segment below offset below whatever the bounds (__groups keeps what
// its newest complete checkpoint needs).
func (r *Replica) ApplyRetentionBelow(below int64) (segment.RetentionResult, error) {
	if r.closed || r.raft == nil {
		return segment.RetentionResult{}, ErrClosed
	}
	return r.log.ApplyRetentionBelow(min(r.commit, r.acked), below)
}

// TransferLeadership asks this primary to hand leadership to replica to
// (catch it up, then tell it to campaign). Proposals are refused while the
// transfer runs; it gives up after the limits' TransferTicksMax.
func (r *Replica) TransferLeadership(to raftlite.NodeID) error {
	if r.closed || r.raft == nil {
		return ErrClosed
	}
	err := r.raft.TransferLeadership(to)
	r.process()
	return err
}

// LogProgress is called (from the shard's IO notify) when the log's written
// or durable offset moved, the log rewound, or it failed. It defers the
// work to the end of the round: the notify callback may not call into
// the log.
func (r *Replica) LogProgress() {
	if r.progressDeferred || r.closed {
		return
	}
	r.progressDeferred = true
	r.cfg.Sched.Defer(r.onLogProgress)
}

func (r *Replica) onLogProgress() {
	r.progressDeferred = false
	if r.closed {
		return
	}
	if err := r.log.Err(); err != nil || r.log.LogEndOffset() < r.rlog.endHint() {
		r.restart(err)
		return
	}
	off := r.localDurable()
	if off > r.acked {
		r.acked = off
		if t, err := r.rlog.TermAt(off); err == nil {
			r.raft.Durable(off, t)
		}
	}
	r.completePrimary()
	if r.cfg.OnCommit != nil {
		r.cfg.OnCommit(r, r.commit)
	}
	r.process()
}

// localDurable is the highest offset durable here under the fsync policy.
func (r *Replica) localDurable() int64 {
	if r.cfg.Log.Fsync == segment.FsyncAlways {
		return r.log.DurableOffset()
	}
	return r.log.WrittenOffset()
}

// process carries out every Ready in the order its doc requires. A Ready
// whose term or vote changed is held after its local steps (reset,
// entries) until the shard's hard-state journal has synced this round's
// changes (one fdatasync for every replica of the shard); resume finishes
// it. Nothing else of the replica's Readys runs meanwhile.
func (r *Replica) process() {
	for !r.closed && r.raft != nil && r.held == nil && r.raft.HasReady() {
		rd := r.raft.Ready()
		if rd.HardStateChanged {
			if j := r.cfg.jrnl; j == nil {
				if err := saveHardState(r.cfg.FS, r.cfg.Dir, rd.HardState); err != nil {
					r.restart(fmt.Errorf("persisting term and vote: %w", err))
					return
				}
			} else {
				j.put(GroupID(r.key), rd.HardState)
				if !r.applyLocal(&rd) {
					return
				}
				r.held = &rd
				j.held = append(j.held, r)
				r.cfg.syncJournal()
				return
			}
		}
		if !r.applyLocal(&rd) {
			return
		}
		r.finishReady(&rd)
	}
}

// resume finishes the Ready held for the journal's sync (err: the sync
// failed, and nothing that depends on the state may leave: restart).
func (r *Replica) resume(err error) {
	rd := r.held
	r.held = nil
	if rd == nil || r.closed || r.raft == nil {
		return
	}
	if err != nil {
		r.restart(err)
		return
	}
	r.finishReady(rd)
	r.process()
}

// applyLocal carries out a Ready's local steps: the log reset and the
// entries. It reports false when the replica had to restart.
func (r *Replica) applyLocal(rd *raftlite.Ready) bool {
	if rd.Reset != nil {
		if err := r.log.ResetAt(rd.Reset.Start, rd.Reset.Base, rd.Reset.PrevTerm, confPayload(rd.Reset.Conf)); err != nil {
			r.restart(fmt.Errorf("resetting the log to %d: %w", rd.Reset.Start, err))
			return false
		}
		r.rlog.reset()
		r.prod, r.txns = newProducers(), newTxnState()
		r.acked = rd.Reset.Start - 1
		if r.cfg.OnReset != nil {
			r.cfg.OnReset(r, rd.Reset.Start, rd.Reset.Snapshot)
		}
	}
	if len(rd.Entries) > 0 {
		if err := r.appendEntries(rd.Entries); err != nil {
			r.restart(err)
			return false
		}
	}
	return true
}

// finishReady sends a Ready's messages, takes its role and commit, and
// advances.
func (r *Replica) finishReady(rd *raftlite.Ready) {
	if len(rd.Messages) > 0 && r.cfg.Send != nil {
		r.fillConfData(rd.Messages)
		r.cfg.Send(r, rd.Messages)
	}
	if rd.ConfChanged {
		r.onConfChanged(rd.Conf)
	}
	// Before the role: a primary that removed itself steps down in the
	// Ready that commits its removal.
	r.completeConf(rd.Commit)
	if rd.SoftStateChanged || r.term != r.raft.Term() {
		r.softState(rd.Lead, rd.Role)
	}
	if rd.CommitChanged && rd.Commit > r.commit {
		r.commit = rd.Commit
		if r.cfg.OnCommit != nil {
			r.cfg.OnCommit(r, r.commit)
		}
		r.completeQuorum()
		r.wakeFetchers()
	}
	r.raft.Advance(*rd)
}

// appendEntries writes Ready.Entries: truncating a divergent suffix first,
// stamping offsets and terms (the batches' header fields outside the CRC).
func (r *Replica) appendEntries(entries []raftlite.Entry) error {
	if first := entries[0].Base; first < r.log.LogEndOffset() {
		if err := r.log.TruncateTo(first); err != nil {
			return fmt.Errorf("truncating the divergent suffix at %d: %w", first, err)
		}
		r.rlog.truncated(first)
		r.acked = min(r.acked, first-1)
		if err := r.rebuildProducers(); err != nil {
			return err
		}
	}
	for _, e := range entries {
		data := e.Data
		if e.Kind == raftlite.EntryLeaderNoop && data == nil {
			// This node's own new term: write the control batch. A
			// follower receives the leader's bytes and keeps them.
			data = noopBatch(r.cfg.NowMs(), r.cfg.DenseOffsets)
		}
		var payload []byte
		if e.Kind == raftlite.EntryConfChange {
			var err error
			if data, payload, err = r.confBatch(e); err != nil {
				return err
			}
			if e.Data == nil {
				r.confData, r.confDataAt = data, e.Last
			}
		}
		if data == nil {
			return fmt.Errorf("entry %v has no bytes", e)
		}
		// Read before the append: a lent batch belongs to the log from
		// there until its write completes.
		h, _ := batch.ReadHeader(data)
		marker, isMarker := markerOf(&h, data)
		userBase := r.log.UserEndOffset()
		size := len(data)
		var base, last int64
		var err error
		switch {
		case payload != nil:
			base, last, err = r.log.AppendLeaderMarked(data, e.Term, payload)
		case r.isChecked(data):
			base, last, err = r.log.AppendLeaderCheckedLent(data, e.Term, r.lend)
			r.checkedAppends++
		default:
			base, last, err = r.log.AppendLeader(data, e.Term)
		}
		if err != nil {
			return fmt.Errorf("appending %v: %w", e, err)
		}
		if base != e.Base || last != e.Last {
			return fmt.Errorf("appended %v at [%d, %d]: the log and the consensus group disagree", e, base, last)
		}
		r.prod.record(&h, base, last, e.Term)
		r.txns.record(&h, marker, isMarker, base, userBase)
		e.Bytes = int32(size)
		r.rlog.appended(e)
	}
	if r.cfg.onAppend != nil {
		r.cfg.onAppend()
	}
	return nil
}

// softState updates the route and fails what a former primary holds.
func (r *Replica) softState(lead raftlite.NodeID, role raftlite.Role) {
	wasPrimary := r.leader == r.cfg.Self
	r.leader, r.term = lead, r.raft.Term()
	if lead != raftlite.None {
		// The group has a primary: the hold has done its work. Kept on, it
		// would freeze this replica's election clock, and with it its
		// leader lease (it would ignore the survivors' votes): a primary
		// lost within 3 election timeouts of this replica opening would
		// be replaced only when the hold ran out.
		r.holdTicks = 0
	}
	if wasPrimary && role != raftlite.RoleLeader {
		err := r.notPrimaryErr()
		r.failPending(err)
		r.failWaiters(err)
	}
	if r.cfg.OnRoute != nil {
		r.cfg.OnRoute(r)
	}
}

// restart rebuilds the replica after its log and its consensus node
// diverged (an append failed, the log rewound after ENOSPC, or it failed
// for good): pending requests fail with ErrStorage, the log is reopened
// when it failed, and a new consensus node starts from the log on disk.
func (r *Replica) restart(cause error) {
	if cause == nil {
		cause = r.log.Err()
	}
	if cause == nil {
		cause = fmt.Errorf("the disk is full: %v; the log went back to offset %d, and writes are refused until space is freed",
			r.log.LastFailure(), r.log.UserEndOffset())
		if r.cfg.OnStorageFull != nil {
			r.cfg.OnStorageFull(r, cause)
		}
	}
	if r.log.Err() != nil && r.cfg.OnStorageFailed != nil {
		r.cfg.OnStorageFailed(r, cause)
	}
	serr := errorf(ErrStorage, "partition %s/%d: %v", r.cfg.Topic, r.cfg.Partition, cause)
	r.failPending(serr)
	r.failWaiters(serr)
	r.raft, r.held = nil, nil
	if r.log.Err() != nil {
		r.log.Close()
		if err := r.openLog(); err != nil {
			r.failure = err
			r.cfg.Sched.AfterFunc(time.Second, r.retryOpen)
			return
		}
	}
	if err := r.startRaft(); err != nil {
		r.failure = err
		r.cfg.Sched.AfterFunc(time.Second, r.retryOpen)
		return
	}
	r.failure = nil
	r.process()
}

func (r *Replica) retryOpen() {
	if r.closed || r.failure == nil || errors.Is(r.failure, ErrFenced) {
		return
	}
	r.restart(r.failure)
}

// Close fails every waiting request with err (ErrClosed when nil), and
// closes the log.
func (r *Replica) Close(err error) error { return r.close(err, (*segment.Log).Close) }

// close is Close with the log closed by closeLog: Log.Close, or for the
// node's stop and for deletion Log.CloseInto and Log.Discard.
func (r *Replica) close(err error, closeLog func(*segment.Log) error) error {
	if r.closed {
		return nil
	}
	if err == nil {
		err = errorf(ErrNotPrimary, "partition %s/%d is closing on this node", r.cfg.Topic, r.cfg.Partition)
	}
	r.failPending(err)
	r.failWaiters(err)
	r.closed = true
	r.seg.in.abort(r.log)
	return closeLog(r.log)
}

// notPrimaryErr is ErrNotPrimary with the best hint this replica has.
func (r *Replica) notPrimaryErr() error {
	e := errorf(ErrNotPrimary, "node %d is not the primary of %s/%d", r.cfg.Self, r.cfg.Topic, r.cfg.Partition)
	if r.leader != raftlite.None && r.leader != r.cfg.Self {
		e.Leader, e.Generation = int32(r.leader), r.term
	}
	return e
}

// endHint is the log end raft expects.
func (r *raftLog) endHint() int64 {
	if n := len(r.tail); n > 0 {
		return r.tail[n-1].Last + 1
	}
	return r.log.LogEndOffset()
}
