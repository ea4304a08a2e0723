package groups

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"
)

// Offsets committed in a transaction (KIP-98's TxnOffsetCommit): staged
// per producer id, invisible to offset fetches (which answer that the
// partition is unstable when they ask for stable offsets, KIP-447),
// until the transaction's marker on this coordinator's partition
// decides them: a commit makes them the group's committed offsets, an
// abort drops them. Staged offsets are records of the coordinator's log
// (txnoffset/<group>/<producer id>/<topic>/<partition>), written before
// TxnOffsetCommit is answered and ended by their tombstones in the same
// append as the commit's offset records (or alone, for an abort): a
// coordinator that fails over while the transaction is open replays
// them, and the marker that reaches the new coordinator decides them.
// Checkpoints carry them like the other records.

// TxnCommit stages offs of group name for producer pid's open
// transaction, on behalf of member id at generation gen (CheckCommit's
// rules; generation -1 with no member id: a client that names no
// member), once their records are durable. done runs once.
func (c *Coordinator) TxnCommit(now time.Time, name, id string, gen int32, pid int64, offs []Offset, done func(error)) {
	defer c.run()
	answer := func(err error) { c.fire = append(c.fire, func() { done(err) }) }
	if err := c.checkCommit(now, name, id, gen); err != nil {
		answer(err)
		return
	}
	for _, o := range offs {
		if o.Offset < 0 {
			answer(fmt.Errorf("%w: %d for %s/%d", ErrInvalidOffset, o.Offset, o.Topic, o.Partition))
			return
		}
	}
	have := c.staged[pid][name]
	adds := 0
	for _, o := range offs {
		if _, ok := have[o.TopicPartition]; !ok {
			adds++
		}
	}
	if len(have)+adds > c.cfg.OffsetsMax {
		answer(fmt.Errorf("%w: a transaction would stage %d offsets of group %q, the maximum is %d", ErrTooManyOffsets, len(have)+adds, name, c.cfg.OffsetsMax))
		return
	}
	recs := make([]Record, len(offs))
	for i, o := range offs {
		recs[i] = Record{Key: TxnOffsetKey(name, pid, o.TopicPartition), Value: encodeOffset(o)}
	}
	kept := append([]Offset(nil), offs...)
	epoch := c.epoch
	c.persist(recs, func(err error) {
		defer c.run()
		if err == nil && c.epoch == epoch {
			for _, o := range kept {
				c.stage(pid, name, o)
			}
		}
		c.fire = append(c.fire, func() { done(err) })
	})
}

// stage notes o as an offset of group name staged by producer pid.
func (c *Coordinator) stage(pid int64, name string, o Offset) {
	if c.staged == nil {
		c.staged = map[int64]map[string]map[TopicPartition]Offset{}
	}
	byGroup := c.staged[pid]
	if byGroup == nil {
		byGroup = map[string]map[TopicPartition]Offset{}
		c.staged[pid] = byGroup
	}
	m := byGroup[name]
	if m == nil {
		m = map[TopicPartition]Offset{}
		byGroup[name] = m
	}
	m[o.TopicPartition] = o
}

// unstage forgets one staged offset.
func (c *Coordinator) unstage(pid int64, name string, tp TopicPartition) {
	byGroup := c.staged[pid]
	if m := byGroup[name]; m != nil {
		delete(m, tp)
		if len(m) == 0 {
			delete(byGroup, name)
		}
	}
	if len(byGroup) == 0 {
		delete(c.staged, pid)
	}
}

// EndTxn decides producer pid's staged offsets at its transaction's
// marker: with commit they become the groups' committed offsets, else
// they are dropped; either once the records saying so are durable (the
// staged offsets' tombstones, with the commit's offset records). A
// producer with nothing staged is done at once.
func (c *Coordinator) EndTxn(pid int64, commit bool, done func(error)) {
	defer c.run()
	byGroup := c.staged[pid]
	if len(byGroup) == 0 {
		c.fire = append(c.fire, func() { done(nil) })
		return
	}
	names := make([]string, 0, len(byGroup))
	for name := range byGroup {
		names = append(names, name)
	}
	sort.Strings(names)
	// A snapshot: a later transaction of the producer stages anew.
	ended := make(map[string]map[TopicPartition]Offset, len(byGroup))
	var recs []Record
	for _, name := range names {
		ended[name] = maps.Clone(byGroup[name])
		for _, tp := range sortedPartitions(byGroup[name]) {
			if commit {
				recs = append(recs, Record{Key: OffsetKey(name, tp), Value: encodeOffset(byGroup[name][tp])})
			}
			recs = append(recs, Record{Key: TxnOffsetKey(name, pid, tp)})
		}
	}
	epoch := c.epoch
	// The offsets stay staged (unstable to a fetch) until their records
	// are durable: dropped before, a fetch in between would answer the
	// offsets before the transaction as stable, and a consumer would
	// read its records again.
	c.persist(recs, func(err error) {
		defer c.run()
		if err == nil && c.epoch == epoch {
			for _, name := range names {
				for tp, o := range ended[name] {
					if cur, ok := c.staged[pid][name][tp]; ok && cur == o {
						c.unstage(pid, name, tp)
					}
				}
				if !commit {
					continue
				}
				g := c.groups[name]
				if g == nil {
					g = newGroup(name)
					c.groups[name] = g
				}
				for tp, o := range ended[name] {
					g.offsets[tp] = o
				}
			}
		}
		c.fire = append(c.fire, func() { done(err) })
	})
}

// stagedRecords are the staged offsets as records, by producer, group
// and partition, for a checkpoint.
func (c *Coordinator) stagedRecords() []Record {
	pids := make([]int64, 0, len(c.staged))
	for pid := range c.staged {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	var out []Record
	for _, pid := range pids {
		names := make([]string, 0, len(c.staged[pid]))
		for name := range c.staged[pid] {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			m := c.staged[pid][name]
			for _, tp := range sortedPartitions(m) {
				out = append(out, Record{Key: TxnOffsetKey(name, pid, tp), Value: encodeOffset(m[tp])})
			}
		}
	}
	return out
}

// Unstable says whether an open transaction staged offsets of group
// name for any of tps (tps nil: any partition).
func (c *Coordinator) Unstable(name string, tps []TopicPartition) bool {
	for _, byGroup := range c.staged {
		m := byGroup[name]
		if len(m) == 0 {
			continue
		}
		if tps == nil {
			return true
		}
		for _, tp := range tps {
			if _, ok := m[tp]; ok {
				return true
			}
		}
	}
	return false
}
