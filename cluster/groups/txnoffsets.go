package groups

import (
	"fmt"
	"sort"
	"time"
)

// Offsets committed in a transaction (KIP-98's TxnOffsetCommit): staged
// per producer id, invisible to offset fetches (which answer that the
// partition is unstable when they ask for stable offsets, KIP-447),
// until the transaction's marker on this coordinator's partition
// decides them: a commit makes them the group's committed offsets (the
// same records as a plain commit, answered once durable), an abort
// drops them.
//
// Staged offsets are held in memory only: a coordinator that fails over
// while a transaction is open loses them, and the transaction's commit
// then commits its records without its offsets (the consumer reprocesses
// them). Persisting them as transactional records replayed up to their
// marker is not built yet (docs/design/transactions.md).

// TxnCommit stages offs of group name for producer pid's open
// transaction, on behalf of member id at generation gen (CheckCommit's
// rules; generation -1 with no member id: a client that names no
// member). done runs once.
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
	if len(m)+len(offs) > c.cfg.OffsetsMax {
		answer(fmt.Errorf("%w: a transaction would stage %d offsets of group %q, the maximum is %d", ErrTooManyOffsets, len(m)+len(offs), name, c.cfg.OffsetsMax))
		return
	}
	for _, o := range offs {
		m[o.TopicPartition] = o
	}
	answer(nil)
}

// EndTxn decides producer pid's staged offsets at its transaction's
// marker: with commit they become the groups' committed offsets (done
// once their records are durable), else they are dropped. A producer
// with nothing staged is done at once.
func (c *Coordinator) EndTxn(pid int64, commit bool, done func(error)) {
	defer c.run()
	byGroup := c.staged[pid]
	if !commit || len(byGroup) == 0 {
		delete(c.staged, pid)
		c.fire = append(c.fire, func() { done(nil) })
		return
	}
	names := make([]string, 0, len(byGroup))
	for name := range byGroup {
		names = append(names, name)
	}
	sort.Strings(names)
	var recs []Record
	for _, name := range names {
		for _, tp := range sortedPartitions(byGroup[name]) {
			recs = append(recs, Record{Key: OffsetKey(name, tp), Value: encodeOffset(byGroup[name][tp])})
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
			if c.staged[pid] != nil && sameStaged(c.staged[pid], byGroup) {
				delete(c.staged, pid)
			}
			for _, name := range names {
				g := c.groups[name]
				if g == nil {
					g = newGroup(name)
					c.groups[name] = g
				}
				for tp, o := range byGroup[name] {
					g.offsets[tp] = o
				}
			}
		}
		c.fire = append(c.fire, func() { done(err) })
	})
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

// sameStaged says a and b are the same staged offsets (the map a commit
// began with): a later transaction of the producer, which stages anew,
// keeps its own.
func sameStaged(a, b map[string]map[TopicPartition]Offset) bool {
	if len(a) != len(b) {
		return false
	}
	for name, m := range a {
		n, ok := b[name]
		if !ok || len(m) != len(n) {
			return false
		}
		for tp, o := range m {
			if n[tp] != o {
				return false
			}
		}
	}
	return true
}
