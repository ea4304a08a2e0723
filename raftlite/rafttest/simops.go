package rafttest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/corestream/corestream/raftlite"
)

// injectFaults draws this tick's faults: partitions (and heals), crashes,
// log compaction, leadership transfers and spontaneous campaigns.
func (s *sim) injectFaults() error {
	p := s.p
	if s.net.partitioned() {
		if s.tick >= s.healAt {
			s.tracef("heal")
			s.net.heal()
		}
	} else if s.rng.IntN(1000) < p.partitionPermille && len(s.nodes) > 1 {
		s.partition()
	}
	if s.rng.IntN(1000) < p.crashPermille {
		if sn := s.nodes[s.rng.IntN(len(s.nodes))]; sn.node != nil {
			s.crash(sn, "at random")
		}
	}
	if s.rng.IntN(1000) < p.compactPermille {
		s.compact(s.nodes[s.rng.IntN(len(s.nodes))])
	}
	if s.rng.IntN(1000) < p.transferPermille {
		if l := s.leader(); l != nil {
			to := raftlite.NodeID(1 + s.rng.IntN(len(s.nodes)))
			s.res.Transfers++
			s.tracef("transfer leadership %d -> %d: %v", l.id, to, l.node.TransferLeadership(to))
		}
	}
	if s.rng.IntN(1000) < p.campaignPermille {
		if sn := s.nodes[s.rng.IntN(len(s.nodes))]; sn.node != nil {
			s.tracef("node %d campaigns", sn.id)
			sn.node.Campaign()
			if err := s.observe(sn); err != nil {
				return err
			}
		}
	}
	if s.rng.IntN(1000) < p.confPermille {
		s.changeMembership()
	}
	return nil
}

// partition cuts the network: one node isolated, or a random split, and
// sometimes only in one direction.
func (s *sim) partition() {
	s.res.Partitions++
	side := make([]int, len(s.nodes))
	if s.rng.IntN(2) == 0 {
		side[s.rng.IntN(len(side))] = 1
	} else {
		for i := range side {
			side[i] = s.rng.IntN(2)
		}
	}
	oneWay := s.rng.IntN(4) == 0
	for i := range side {
		for j := range side {
			if side[i] != side[j] && (!oneWay || side[i] == 0) {
				s.net.cut[i][j] = true
			}
		}
	}
	s.healAt = s.tick + 5 + int64(s.rng.IntN(60))
	if s.p.chaos {
		s.healAt = s.tick + 1 + int64(s.rng.IntN(15))
	}
	s.tracef("partition %v one-way=%v until tick %d", side, oneWay, s.healAt)
}

// compact moves a node's log start forward to a random batch boundary at
// or below both its commit+1 and its durable offset+1 (retention never
// deletes what is not committed, nor what is not yet on disk).
func (s *sim) compact(sn *simNode) {
	if sn.node == nil {
		return
	}
	// The node layer knows the commit only from Readys it handled.
	limit := min(sn.commit, sn.node.Status().Durable) + 1
	var bases []int64
	for _, e := range sn.disk.Log.All() {
		if e.Base > limit {
			break
		}
		bases = append(bases, e.Base)
	}
	if end := sn.disk.Log.EndOffset(); end <= limit {
		bases = append(bases, end)
	}
	if len(bases) == 0 {
		return
	}
	start := bases[len(bases)-1] // as far as allowed, half the time
	if s.rng.IntN(2) == 0 {
		start = bases[s.rng.IntN(len(bases))]
	}
	if err := sn.disk.Compact(start); err != nil {
		return // the synced image is shorter: skip this time
	}
	if s.p.snapshots && start > 0 {
		sn.disk.Snapshot = s.chk.snapshotOf(start - 1)
	}
	s.tracef("node %d compacts to %d", sn.id, start)
}

// leader returns a running node that believes it leads, with the highest
// term, or nil.
func (s *sim) leader() *simNode {
	var best *simNode
	for _, sn := range s.nodes {
		if sn.node != nil && sn.node.Role() == raftlite.RoleLeader && (best == nil || sn.node.Term() > best.node.Term()) {
			best = sn
		}
	}
	return best
}

// runClients times out waiting clients and starts new operations.
func (s *sim) runClients() error {
	for ci, c := range s.clients {
		if c.op != nil && s.tick >= c.deadline {
			if c.op.state == opPending {
				c.op.state = opUnknown
			}
			c.op = nil
		}
		if c.op != nil || !s.faults || s.rng.IntN(1000) >= s.p.opPermille {
			continue
		}
		target := c.leader
		if target == raftlite.None || s.rng.IntN(10) < 2 {
			target = raftlite.NodeID(1 + s.rng.IntN(len(s.nodes)))
		}
		kind := opAppend
		if s.rng.IntN(6) == 0 {
			kind = opRead
		}
		c.op = s.propose(target, ci, kind)
		if c.op == nil {
			if sn := s.nodes[target-1]; sn.node != nil {
				c.leader = sn.node.Leader()
			} else {
				c.leader = raftlite.None
			}
			continue
		}
		c.deadline = s.tick + opTimeoutTicks
	}
	return nil
}

// propose issues one client operation at node target; nil when the node is
// down or refuses (the operation then certainly did not happen and is not
// recorded).
func (s *sim) propose(target raftlite.NodeID, client int, kind opKind) *simOp {
	sn := s.nodes[target-1]
	if sn.node == nil {
		return nil
	}
	s.nextOp++
	data := make([]byte, 9+s.rng.IntN(60))
	binary.BigEndian.PutUint64(data, s.nextOp)
	data[8] = byte(kind)
	count := int32(1)
	if kind == opAppend {
		count = int32(1 + s.rng.IntN(4))
	}
	ent, err := sn.node.Propose(count, data)
	if err != nil {
		s.tracef("client %d: propose at %d: %v", client, target, err)
		return nil
	}
	s.res.Proposed++
	op := &simOp{id: s.nextOp, client: client, kind: kind, ent: ent, node: target, inc: sn.inc, call: s.now, state: opPending}
	s.tracef("client %d: op %d (%v) proposed at %d as %v", client, op.id, kind, target, ent)
	sn.pending = append(sn.pending, op)
	s.ops = append(s.ops, op)
	return op
}

// settleOps settles the operations pending at sn once its commit covers
// them: acknowledged when its log still holds the entry there, failed when
// it holds another (the committed one). An entry that left sn's log before
// the commit reached it may still commit through a later leader that holds
// it (an entry of term 3 truncated by the leader of term 4 can be committed
// by the leader of term 6): its outcome is unknown to the client.
func (s *sim) settleOps(sn *simNode) error {
	keep := sn.pending[:0]
	for _, op := range sn.pending {
		if op.state != opPending {
			continue
		}
		t, err := sn.disk.Log.TermAt(op.ent.Last)
		present := err == nil && t == op.ent.Term
		committed := s.chk.isCommitted(op.ent)
		switch {
		case present && op.ent.Last > sn.commit:
			keep = append(keep, op)
			continue
		case op.ent.Last > sn.commit:
			op.state = opUnknown
			s.tracef("op %d left the log of %d: outcome unknown", op.id, sn.id)
		case present, errors.Is(err, raftlite.ErrCompacted) && committed:
			if !committed {
				return fmt.Errorf("op %d acknowledged by node %d but %v is not in the committed log", op.id, sn.id, op.ent)
			}
			if ok, n := s.chk.durableOnQuorum(op.ent, s.disks()); !ok {
				return fmt.Errorf("op %d acknowledged (%v) but durable on only %d disks of its configuration", op.id, op.ent, n)
			}
			op.state, op.ret = opAcked, s.now
			op.out = s.outputOf(op)
			s.res.Acked++
			s.clients[op.client].leader = sn.id
			s.tracef("op %d acknowledged by %d", op.id, sn.id)
		default:
			if committed {
				return fmt.Errorf("op %d failed at node %d but %v is committed", op.id, sn.id, op.ent)
			}
			op.state = opFailed
			s.tracef("op %d failed at %d", op.id, sn.id)
		}
		if c := s.clients[op.client]; c.op == op {
			c.op = nil
		}
	}
	sn.pending = keep
	return nil
}

// outputOf is what a committed operation returns: its offsets, and for a
// read the (length, hash) of the client log up to its marker.
func (s *sim) outputOf(op *simOp) opOutput {
	out := opOutput{base: op.ent.Base, last: op.ent.Last}
	if op.kind != opRead {
		return out
	}
	for _, e := range s.chk.committed {
		if e.Last > op.ent.Last {
			break
		}
		if e.Kind != raftlite.EntryData || len(e.Data) < 9 {
			continue
		}
		out.n++
		out.hash = chainHash(out.hash, binary.BigEndian.Uint64(e.Data))
	}
	return out
}

// checkLogsPairwise checks log matching directly between every pair of
// written logs.
func (s *sim) checkLogsPairwise() error {
	for i, a := range s.nodes {
		for _, b := range s.nodes[i+1:] {
			if err := checkPairs(a.disk.Log, b.disk.Log, a.id, b.id); err != nil {
				return err
			}
		}
	}
	return nil
}

// finish heals everything and checks liveness: a stable leader within
// recoverTicksMax, then fresh proposals committed on every node within
// finalTicksMax more. A proposal lost to a leader change right after the
// heal (a node cut off during the schedule may still win the next
// election) is proposed again, at most finalRetriesMax times. Then it
// checks the client history.
func (s *sim) finish() error {
	s.faults = false
	s.net.heal()
	s.net.dropPermille, s.net.dupPermille, s.net.delayMax = 0, 0, 2
	for _, sn := range s.nodes {
		sn.restartAt = 0
	}
	s.tracef("healed; waiting for a leader")
	healed := s.tick
	final := make([]*simOp, 3)
	retries := 0
	led := false
	window := healed + recoverTicksMax + finalTicksMax + min(s.logLag(), finalLagTicksMax)
	for ; s.tick < window; s.tick++ {
		if err := s.runTick(); err != nil {
			return err
		}
		lead := s.stableLeader()
		if lead == nil {
			if !led && s.tick >= healed+recoverTicksMax {
				return fmt.Errorf("liveness: no stable leader %d ticks after healing: %s", recoverTicksMax, s.describe())
			}
			continue
		}
		if !led {
			led = true
			s.res.RecoverTick = int(s.tick - healed)
		}
		for i, op := range final {
			if op != nil && (op.state == opPending || op.state == opAcked) {
				continue
			}
			if retries++; retries > 3*finalRetriesMax {
				return fmt.Errorf("liveness: final proposals lost %d times: %s", retries-1, s.describe())
			}
			if final[i] = s.propose(lead.id, i, opAppend); final[i] == nil {
				return fmt.Errorf("liveness: stable leader %d refused a proposal", lead.id)
			}
		}
		if s.allAcked(final) && s.converged() {
			break
		}
	}
	if !s.allAcked(final) || !s.converged() {
		return fmt.Errorf("liveness: final proposals not committed everywhere %d ticks after healing: %s",
			window-healed, s.describe())
	}
	if err := s.checkLogsPairwise(); err != nil {
		return err
	}
	s.res.Committed = len(s.chk.committed)
	for _, e := range s.chk.committed {
		if e.Kind == raftlite.EntryConfChange {
			s.res.ConfApplied++
		}
	}
	s.res.Terms = len(s.chk.leaders)
	return s.checkHistory()
}

// stableLeader returns the leader when every member of its configuration
// runs, agrees on its term and follows it, no leadership transfer is under
// way and its configuration is committed and counts it (a leader that
// removed itself is about to step down).
func (s *sim) stableLeader() *simNode {
	l := s.leader()
	if l == nil || l.node.Transferee() != raftlite.None {
		return nil
	}
	st := l.node.Status()
	if st.ConfIndex > st.Commit || !st.Conf.Voters.Has(l.id) {
		return nil
	}
	for _, sn := range s.nodes {
		if !st.Conf.Members().Has(sn.id) {
			continue
		}
		if sn.node == nil || sn.node.Term() != l.node.Term() || sn.node.Leader() != l.id {
			return nil
		}
	}
	return l
}

func (s *sim) allAcked(ops []*simOp) bool {
	for _, op := range ops {
		if op == nil || op.state != opAcked {
			return false
		}
	}
	return true
}

// converged reports whether every node's log and commit equal the
// leader's.
func (s *sim) converged() bool {
	l := s.leader()
	if l == nil {
		return false
	}
	last := l.disk.Log.EndOffset() - 1
	members := l.node.Membership().Members()
	for _, sn := range s.nodes {
		if !members.Has(sn.id) {
			continue
		}
		if sn.node == nil || sn.commit != last || sn.disk.Log.EndOffset()-1 != last {
			return false
		}
	}
	return true
}

func (s *sim) describe() string {
	out := ""
	for _, sn := range s.nodes {
		if sn.node == nil {
			out += fmt.Sprintf("[%d down] ", sn.id)
			continue
		}
		st := sn.node.Status()
		out += fmt.Sprintf("[%d %v term=%d lead=%d commit=%d last=%d durable=%d q=%v] ",
			sn.id, st.Role, st.Term, st.Lead, st.Commit, st.LastOffset, st.Durable, st.Quiesced)
	}
	return out
}

// checkHistory resolves operations whose outcome the client never learned
// from the final committed log, then checks linearizability.
func (s *sim) checkHistory() error {
	var hist []porcupine.Operation
	for _, op := range s.ops {
		switch op.state {
		case opFailed:
			continue
		case opPending, opUnknown:
			at, ok := s.chk.commitStep(op.ent)
			if !ok {
				continue
			}
			// The client never heard back, but the operation took effect
			// at the latest when its entry committed: every read or
			// append invoked after that is ordered after it. (An
			// unbounded return would be as sound and make porcupine's
			// search explode.)
			op.out = s.outputOf(op)
			op.ret = at
		case opAcked:
			if !s.chk.isCommitted(op.ent) {
				return fmt.Errorf("op %d acknowledged but %v is not in the final committed log", op.id, op.ent)
			}
		}
		hist = append(hist, porcupine.Operation{
			ClientId: op.client, Input: opInput{kind: op.kind, id: op.id},
			Call: op.call, Output: op.out, Return: op.ret,
		})
	}
	checked, err := checkLinearizable(hist, 10*time.Second)
	s.res.Linearized = checked
	if err != nil {
		for _, op := range hist {
			s.tracef("history: client %d %s call %d return %d", op.ClientId,
				logModel.DescribeOperation(op.Input, op.Output), op.Call, op.Return)
		}
	}
	return err
}
