package rafttest

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"sort"

	"github.com/corestream/corestream/raftlite"
)

// checker holds the simulator's global knowledge and checks Raft's safety
// properties against it:
//
//   - election safety: at most one leader per term;
//   - log matching: an entry is identified by (term, base); every sighting
//     of it has the same extent, data and predecessor term, so logs that
//     share an (offset, term) are identical up to it (by induction);
//   - leader append-only: a term's entries are created at increasing
//     offsets;
//   - state-machine safety: every node's committed prefix agrees with one
//     global committed log, no committed entry is ever removed from a log
//     (except below a reset's start, where it is compacted), and every
//     committed entry is durable on a majority of the voters of a
//     configuration that may have committed it (see durableOnQuorum);
//   - commit monotonicity within a node's incarnation.
type checker struct {
	// members are the voters at creation.
	members raftlite.ReplicaSet
	// confs are the configuration entries ever created, in order of
	// first sighting; committedConfs those of the committed log, in
	// offset order.
	confs          []raftlite.Entry
	committedConfs []raftlite.Entry
	// leaders maps a term to the node seen leading it.
	leaders map[int32]raftlite.NodeID
	// canon maps (term, base) to the entry's identity.
	canon map[canonKey]canonEntry
	// termLast is the highest last offset created in each term.
	termLast map[int32]int64
	// committed is the global committed log, contiguous from offset 0;
	// committedAt[i] is the step at which committed[i] first committed.
	committed   []raftlite.Entry
	committedAt []int64
}

type canonKey struct {
	term int32
	base int64
}

type canonEntry struct {
	last     int64
	kind     raftlite.EntryKind
	conf     raftlite.Membership
	prevTerm int32
	data     []byte
}

func newChecker(members raftlite.ReplicaSet) *checker {
	return &checker{
		members:  members,
		leaders:  map[int32]raftlite.NodeID{},
		canon:    map[canonKey]canonEntry{},
		termLast: map[int32]int64{},
	}
}

// observeRole records a node's role; two leaders in one term fail.
func (c *checker) observeRole(id raftlite.NodeID, role raftlite.Role, term int32) error {
	if role != raftlite.RoleLeader {
		return nil
	}
	if other, ok := c.leaders[term]; ok && other != id {
		return fmt.Errorf("election safety: nodes %d and %d both led term %d", other, id, term)
	}
	c.leaders[term] = id
	return nil
}

// observeEntries checks entries about to be appended to a log whose term
// at ents[0].Base-1 is prevTerm, recording first sightings as canonical.
func (c *checker) observeEntries(id raftlite.NodeID, prevTerm int32, ents []raftlite.Entry) error {
	for _, e := range ents {
		k := canonKey{e.Term, e.Base}
		ce, ok := c.canon[k]
		if !ok {
			if last, seen := c.termLast[e.Term]; seen && e.Base <= last {
				return fmt.Errorf("leader append-only: node %d has new entry %v at or below %d, already used in term %d", id, e, last, e.Term)
			}
			c.canon[k] = canonEntry{last: e.Last, kind: e.Kind, conf: e.Conf, prevTerm: prevTerm, data: e.Data}
			c.termLast[e.Term] = max(c.termLast[e.Term], e.Last)
			if e.Kind == raftlite.EntryConfChange {
				c.confs = append(c.confs, e)
			}
		} else if ce.last != e.Last || ce.kind != e.Kind || ce.conf != e.Conf || ce.prevTerm != prevTerm || (e.Data != nil && !bytes.Equal(ce.data, e.Data)) {
			return fmt.Errorf("log matching: node %d has entry %v (prev term %d) but it was created as last=%d prev term %d", id, e, prevTerm, ce.last, ce.prevTerm)
		}
		prevTerm = e.Term
	}
	return nil
}

// commitIndex returns the index in c.committed of the entry with base,
// or -1.
func (c *checker) commitIndex(base int64) int {
	i := sort.Search(len(c.committed), func(i int) bool { return c.committed[i].Last >= base })
	if i < len(c.committed) && c.committed[i].Base == base {
		return i
	}
	return -1
}

// isCommitted reports whether e is in the global log: same offsets and
// term, and same data when e carries data. (A single-node group that
// crashes before persisting its hard state may lead the same term twice;
// what it proposed the first time never left it, but a client may hold a
// proposal with the same offsets and term.)
func (c *checker) isCommitted(e raftlite.Entry) bool {
	i := c.commitIndex(e.Base)
	if i < 0 {
		return false
	}
	g := c.committed[i]
	return g.Term == e.Term && g.Last == e.Last && (e.Data == nil || bytes.Equal(g.Data, e.Data))
}

// commitStep returns the step at which e committed (ok false when it is
// not committed).
func (c *checker) commitStep(e raftlite.Entry) (int64, bool) {
	if !c.isCommitted(e) {
		return 0, false
	}
	return c.committedAt[c.commitIndex(e.Base)], true
}

// committedLast is the global commit offset.
func (c *checker) committedLast() int64 {
	if n := len(c.committed); n > 0 {
		return c.committed[n-1].Last
	}
	return -1
}

// observeRemoved checks entries a truncation, reset or crash removed from a
// log. Committed entries may go only below a reset's start.
func (c *checker) observeRemoved(id raftlite.NodeID, removed []raftlite.Entry, resetStart int64) error {
	for _, e := range removed {
		if e.Last < resetStart {
			continue
		}
		if c.isCommitted(e) {
			return fmt.Errorf("state-machine safety: node %d removed committed entry %v", id, e)
		}
	}
	return nil
}

// observeCommit checks node id's commit moving from old to new over log
// and extends the global committed log. disks are every node's disk, to
// check that newly committed entries are durable on a majority.
func (c *checker) observeCommit(now int64, id raftlite.NodeID, old, new int64, log *raftlite.MemLog, disks []*Disk) error {
	if new < old {
		return fmt.Errorf("commit went backwards on node %d: %d -> %d", id, old, new)
	}
	if new == old {
		return nil
	}
	lo := max(old+1, log.StartOffset())
	ents, err := log.Entries(lo, new+1, 1<<62, nil)
	if err != nil {
		return fmt.Errorf("node %d committed %d..%d but its log [%d, %d) lacks them: %v",
			id, old+1, new, log.StartOffset(), log.EndOffset(), err)
	}
	if len(ents) > 0 && ents[len(ents)-1].Last != new {
		return fmt.Errorf("node %d commit %d is inside batch %v", id, new, ents[len(ents)-1])
	}
	for _, e := range ents {
		if i := c.commitIndex(e.Base); i >= 0 {
			if g := c.committed[i]; g.Term != e.Term || g.Last != e.Last {
				return fmt.Errorf("state-machine safety: node %d committed %v where %v was committed", id, e, g)
			}
			continue
		}
		if want := c.committedLast() + 1; e.Base != want {
			return fmt.Errorf("node %d committed %v but the global log ends at %d", id, e, want-1)
		}
		if ok, n := c.durableOnQuorum(e, disks); !ok {
			return fmt.Errorf("durability: entry %v committed (by node %d) but durable on only %d disks of its configuration", e, id, n)
		}
		c.committed = append(c.committed, e)
		c.committedAt = append(c.committedAt, now)
		if e.Kind == raftlite.EntryConfChange {
			c.committedConfs = append(c.committedConfs, e)
		}
	}
	return nil
}

// durableOnQuorum reports whether e is durable on a majority of the voters
// of a configuration that may have committed it, and the most copies it
// found among one configuration's voters. The leader that commits e counts
// with the configuration in force in its log: the one in force at e in
// the committed log, or (single-server changes: the next change waits for
// the previous one to commit) a configuration entry created at or after e. Not
// knowing which leader committed e, the check accepts any of those; it is
// exact for a group whose membership never changes.
func (c *checker) durableOnQuorum(e raftlite.Entry, disks []*Disk) (ok bool, most int) {
	candidates := []raftlite.ReplicaSet{c.members}
	for i := len(c.committedConfs) - 1; i >= 0; i-- {
		if c.committedConfs[i].Last <= e.Base {
			candidates[0] = c.committedConfs[i].Conf.Voters
			break
		}
	}
	for _, ce := range c.confs {
		if ce.Base >= e.Base { // e itself too: a leader counts a change with it
			candidates = append(candidates, ce.Conf.Voters)
		}
	}
	for _, voters := range candidates {
		n := c.durableCopies(e, disks, voters)
		if n >= voters.Quorum() {
			return true, n
		}
		most = max(most, n)
	}
	return false, most
}

// durableCopies counts the disks of voters whose synced log holds e (or
// has compacted past it). disks[i] is node i+1's.
func (c *checker) durableCopies(e raftlite.Entry, disks []*Disk, voters raftlite.ReplicaSet) int {
	n := 0
	for i, d := range disks {
		if !voters.Has(raftlite.NodeID(i + 1)) {
			continue
		}
		s := d.Synced
		if s.StartOffset() > e.Last {
			n++
			continue
		}
		if t, err := s.TermAt(e.Last); err == nil && t == e.Term {
			n++
		}
	}
	return n
}

// checkPairs checks log matching directly on two logs: for their highest
// common (offset, term), every entry up to it is identical.
func checkPairs(a, b *raftlite.MemLog, ida, idb raftlite.NodeID) error {
	ae := a.All()
	for i := len(ae) - 1; i >= 0; i-- {
		e := ae[i]
		if t, err := b.TermAt(e.Last); err != nil || t != e.Term {
			continue
		}
		lo := max(a.StartOffset(), b.StartOffset())
		x, _ := a.Entries(lo, e.Last+1, 1<<62, nil)
		y, _ := b.Entries(lo, e.Last+1, 1<<62, nil)
		if len(x) != len(y) {
			return fmt.Errorf("log matching: nodes %d and %d share %v but differ below it: %s vs %s",
				ida, idb, e, formatEntries(x), formatEntries(y))
		}
		for j := range x {
			if x[j].Base != y[j].Base || x[j].Last != y[j].Last || x[j].Term != y[j].Term || !bytes.Equal(x[j].Data, y[j].Data) {
				return fmt.Errorf("log matching: nodes %d and %d share %v but differ at %v vs %v", ida, idb, e, x[j], y[j])
			}
		}
		return nil
	}
	return nil
}

// snapshotOf encodes the metadata-group "state machine" at offset last: a
// hash of the committed log up to it.
func (c *checker) snapshotOf(last int64) []byte {
	h := fnv.New64a()
	for _, e := range c.committed {
		if e.Last > last {
			break
		}
		fmt.Fprintf(h, "%d/%d-%d:%s;", e.Term, e.Base, e.Last, e.Data)
	}
	return []byte(fmt.Sprintf("%d:%x", last, h.Sum64()))
}
