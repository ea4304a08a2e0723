package node

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"
)

// metaTopicID names the metadata group's log; no client topic can have it
// (topic ids are random version-4 UUIDs, whose version nibble is 4).
var metaTopicID = [16]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

const (
	// metaShard hosts the metadata group and the controller.
	metaShard = 0
	// resultsMax bounds the apply results kept for proposers.
	resultsMax = 4096
	// adminTimeoutDefault bounds an admin request that gives no timeout.
	adminTimeoutDefault = 30 * time.Second
)

// applied is the outcome of one metadata command, kept for its proposer.
type applied struct {
	res metadata.Result
	err error
}

// controller runs the metadata group on shard metaShard: it proposes
// commands, applies committed ones to the state machine, publishes Views
// and asks every shard to reconcile its replicas with them. All of its
// fields are owned by shard metaShard.
type controller struct {
	n       *Node
	sh      *shard.Shard
	r       *partition.Replica
	state   *metadata.State
	applied int64
	// results holds apply outcomes by log offset for proposers;
	// resultOrder evicts the oldest past resultsMax.
	results     map[int64]applied
	resultOrder []int64
	iter        batch.Records
	bal         *balancer
	// snapshot is the latest metadata snapshot (encodeSnapshot) and
	// snapshotAt the offset it covers (-1: none); a leader sends it to a
	// follower that needs entries the log no longer holds.
	snapshot   []byte
	snapshotAt int64
	// installed counts snapshots received from a leader.
	installed int
	// parked holds proposers whose command committed before this node
	// had applied it, in offset order; onCommit answers them.
	parked []parkedProposal
	// appliedTerm is the term of the entry at applied (0: none applied
	// since the start); resetAt and resetTerm are the end of a snapshot
	// the primary sent and its term (0: none). They decide when the
	// metadata is loaded (ready.go).
	appliedTerm int32
	resetAt     int64
	resetTerm   int32
}

// parkedProposal is a proposer waiting for its committed command to be
// applied here.
type parkedProposal struct {
	offset int64
	done   func(metadata.Result, error)
}

// startController opens the metadata group and waits until the local
// metadata is replayed (a single node: elected and caught up).
func (n *Node) startController() error {
	done := make(chan error, 1)
	sh := n.group.Shard(metaShard)
	err := sh.Do(func(sh *shard.Shard) {
		c := &controller{n: n, sh: sh, state: metadata.New(), applied: -1, snapshotAt: -1, results: map[int64]applied{}}
		hasSnap, err := c.loadSnapshot()
		if err != nil {
			done <- err
			return
		}
		var reps []raftlite.NodeID
		for _, m := range n.roster {
			reps = append(reps, raftlite.NodeID(m.ID))
		}
		sort.Slice(reps, func(i, j int) bool { return reps[i] < reps[j] })
		cfg := n.segmentConfig()
		// Compaction, not retention, shortens the metadata log: a
		// retention pass (ApplyRetention up to a snapshot's offset)
		// deletes every whole segment the snapshot covers.
		cfg.RetentionBytes, cfg.RetentionMs = 1, -1 // 0 would mean the default
		cfg.SegmentBytes = min(cfg.SegmentBytes, 8<<20)
		r, err := n.hosts[metaShard].Open(partition.Config{
			FS: n.fs, Dir: filepath.Join(n.dir, metadata.MetaTopic), Log: cfg,
			Topic: metadata.MetaTopic, TopicID: metaTopicID, Partition: 0,
			Self: n.self, Replicas: reps, Limits: n.limits,
			Send: n.sendFn(), OnCommit: c.onCommit, OnRoute: n.routeChanged, Alive: n.aliveFn(),
			OnReset: c.onReset,
		})
		if err != nil {
			done <- fmt.Errorf("node: metadata log: %w", err)
			return
		}
		if start := r.Log().LogStartOffset(); start > c.applied+1 {
			r.Close(nil)
			done <- fmt.Errorf("node: the metadata log starts at %d but the snapshot (present: %v) covers only up to %d: metadata is missing", start, hasSnap, c.applied)
			return
		}
		if hasSnap {
			c.publish()
		}
		n.opened(r, metaShard)
		c.r = r
		n.ctrl = c
		c.startBalancer()
		done <- nil
	})
	if err != nil {
		return err
	}
	if err := <-done; err != nil {
		return err
	}
	// A single node elects itself and replays at once; wait for it so the
	// node starts with its topics open. In a cluster the metadata arrives
	// when a quorum forms; until then the node answers metadata reads with
	// METADATA_NOT_READY (ready.go) and the rest with retriable errors.
	if len(n.roster) == 1 {
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if n.metaLoaded.Load() {
				return nil
			}
			time.Sleep(2 * time.Millisecond)
		}
		return errors.New("node: the metadata log did not replay within 30 s")
	}
	return nil
}

// metaRoute is the metadata primary and generation (-1 when unknown).
func (n *Node) metaRoute() (int32, int32) {
	rt, ok := n.routes.get(shardKey(metaTopicID, 0))
	if !ok {
		return -1, -1
	}
	return rt.leader, rt.term
}

func (c *controller) stop() {}

// onCommit applies every committed command up to commit.
//
// A follower may learn a commit before its own copy of the entries is
// written (its append is still in the kernel): it applies what is
// readable now, and the rest when the write completes (the replica calls
// OnCommit again on log progress).
func (c *controller) onCommit(r *partition.Replica, commit int64) {
	changed := false
	commit = min(commit, r.Log().WrittenOffset())
	for c.applied < commit {
		spans, err := r.Log().Read(c.applied+1, 16<<20, commit)
		if err != nil || len(spans) == 0 {
			c.n.log.Error("metadata: reading committed entries", "from", c.applied+1, "commit", commit, "written", r.Log().WrittenOffset(), "leo", r.Log().LogEndOffset(), "err", err)
			segment.ReleaseSpans(spans)
			return
		}
		var data []byte
		for _, sp := range spans {
			if data, err = sp.AppendTo(data); err != nil {
				break
			}
		}
		last := spans[len(spans)-1].LastOffset
		segment.ReleaseSpans(spans)
		if err != nil {
			c.n.log.Error("metadata: reading committed entries", "err", err)
			return
		}
		for len(data) > 0 {
			h, err := batch.ReadHeader(data)
			if err != nil || h.Size() > len(data) {
				c.n.log.Error("metadata: bad batch in the metadata log", "offset", c.applied+1, "err", err)
				return
			}
			b := data[:h.Size()]
			data = data[h.Size():]
			c.appliedTerm = h.PartitionLeaderEpoch
			if h.IsControl() || h.LastOffset() <= c.applied {
				continue
			}
			changed = c.applyBatch(b) || changed
		}
		c.applied = last
	}
	if changed {
		c.publish()
	}
	c.maybeSnapshot()
	c.checkLoaded()
	for len(c.parked) > 0 && c.parked[0].offset <= c.applied {
		p := c.parked[0]
		c.parked = c.parked[1:]
		c.answer(p.offset, p.done)
	}
}

// applyBatch applies the commands of one batch (one record each).
func (c *controller) applyBatch(b []byte) bool {
	if err := c.iter.Reset(b); err != nil {
		c.n.log.Error("metadata: corrupt batch", "err", err)
		return false
	}
	changed := false
	for c.iter.Next() {
		rec := c.iter.Record()
		cmd, err := metadata.DecodeCommand(rec.Value)
		var res metadata.Result
		if err == nil {
			res, err = c.state.Apply(cmd)
			changed = changed || err == nil
			if err == nil {
				c.n.logMetadataChange(cmd, res, rec.Offset, c.appliedTerm)
			}
		}
		if err != nil && !errors.Is(err, metadata.ErrTopicExists) && !errors.Is(err, metadata.ErrUnknownTopic) {
			c.n.log.Warn("metadata: command refused", "offset", rec.Offset, "op", cmd.Op, "err", err)
		}
		c.keep(rec.Offset, applied{res, err})
	}
	return changed
}

func (c *controller) keep(off int64, a applied) {
	c.results[off] = a
	c.resultOrder = append(c.resultOrder, off)
	for len(c.resultOrder) > resultsMax {
		delete(c.results, c.resultOrder[0])
		c.resultOrder = c.resultOrder[1:]
	}
}

// publish stores a new View and asks every shard to reconcile with it.
func (c *controller) publish() {
	c.n.view.Store(newView(c.state, c.applied))
	for i := range c.n.hosts {
		c.n.requestReconcile(i)
	}
}

// propose appends cmd to the metadata log and calls done on shard
// metaShard with the outcome once it is applied (or failed).
func (c *controller) propose(cmd metadata.Command, timeout time.Duration, done func(metadata.Result, error)) {
	b, err := batch.NewBuilder(batch.Options{})
	if err == nil {
		err = b.AppendKV(time.Now().UnixMilli(), nil, cmd.Encode())
	}
	var data []byte
	if err == nil {
		data, err = b.Build()
	}
	if err != nil {
		done(metadata.Result{}, wire.Errorf(wire.ErrInvalidRequest, "metadata command: %v", err))
		return
	}
	req := &partition.ProduceArgs{Generation: partition.GenerationUnknown, Timeout: timeout, Records: data}
	c.r.Produce(req, func(pr partition.ProduceResult) {
		if pr.Err != nil {
			done(metadata.Result{}, c.n.metaErr(pr.Err))
			return
		}
		if off := pr.Produced.BaseOffset; off > c.applied {
			// The followers made it durable, and so committed it, before
			// this node's own write of it completed; onCommit applies it
			// (and answers) when the write does.
			c.parked = append(c.parked, parkedProposal{off, done})
			return
		}
		c.answer(pr.Produced.BaseOffset, done)
	})
}

// answer gives the proposer of the command at off, applied, its result.
func (c *controller) answer(off int64, done func(metadata.Result, error)) {
	a, ok := c.results[off]
	if !ok {
		done(metadata.Result{}, wire.Errorf(wire.ErrUnknownServerError, "metadata command at offset %d committed but its result is gone", off))
		return
	}
	delete(c.results, off)
	done(a.res, a.err)
}

// metaErr turns a metadata replica's NOT_PRIMARY into NOT_METADATA_PRIMARY
// with the metadata primary's address.
func (n *Node) metaErr(err error) error {
	err = wireError(err)
	var er *wire.ErrorResponse
	if errors.As(err, &er) && er.Err == wire.ErrNotPrimary {
		e := wire.Errorf(wire.ErrNotMetadataPrimary, "node %d is not the metadata primary", n.self)
		if er.Hint != nil {
			e.Hint = &wire.Hint{NodeID: er.Hint.NodeID, Address: n.addrOf(er.Hint.NodeID), Generation: er.Hint.Generation}
		}
		return e
	}
	return err
}

// requireMetaPrimary returns NOT_METADATA_PRIMARY unless this node leads
// the metadata group.
func (c *controller) requireMetaPrimary() error {
	if c.r.IsPrimary() {
		return nil
	}
	return c.n.metaErr(c.r.CheckRoute(partition.GenerationUnknown))
}

func shardKey(id [16]byte, p int32) [20]byte { return shard.PartitionKey(id, uint32(p)) }
