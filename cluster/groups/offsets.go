package groups

import (
	"fmt"
	"sort"
	"time"
)

// Committed offsets. A commit is checked (member, generation), written
// to the log, and only once the log says it is durable is it applied
// and answered: an acknowledged commit is in the log a new coordinator
// replays, and one the log refused changes nothing.

// Commit stores offs for group name on behalf of member id at generation
// gen (CheckCommit's rules); done runs once, after the records are
// durable (nil) or with the refusal or the log's error.
func (c *Coordinator) Commit(now time.Time, name, id string, gen int32, offs []Offset, done func(error)) {
	defer c.run()
	fail := func(err error) { c.fire = append(c.fire, func() { done(err) }) }
	if err := c.checkCommit(now, name, id, gen); err != nil {
		fail(err)
		return
	}
	for _, o := range offs {
		if o.Offset < 0 {
			fail(fmt.Errorf("%w: %d for %s/%d", ErrInvalidOffset, o.Offset, o.Topic, o.Partition))
			return
		}
	}
	g := c.groups[name]
	if g == nil {
		if len(c.groups) >= c.cfg.GroupsMax {
			fail(fmt.Errorf("%w: %d", ErrTooManyGroups, c.cfg.GroupsMax))
			return
		}
		g = newGroup(name)
		c.groups[name] = g
	}
	added := 0
	for _, o := range offs {
		if _, ok := g.offsets[o.TopicPartition]; !ok {
			added++
		}
	}
	if len(g.offsets)+added > c.cfg.OffsetsMax {
		fail(fmt.Errorf("%w: group %q would hold %d, the maximum is %d", ErrTooManyOffsets, name, len(g.offsets)+added, c.cfg.OffsetsMax))
		return
	}
	if len(offs) == 0 {
		fail(nil)
		return
	}
	recs := make([]Record, len(offs))
	for i, o := range offs {
		recs[i] = Record{Key: OffsetKey(name, o.TopicPartition), Value: encodeOffset(o)}
	}
	kept := append([]Offset(nil), offs...)
	epoch := c.epoch
	c.persist(recs, func(err error) {
		defer c.run()
		if err == nil && c.epoch == epoch {
			g := c.groups[name]
			if g == nil {
				g = newGroup(name)
				c.groups[name] = g
			}
			for _, o := range kept {
				g.offsets[o.TopicPartition] = o
			}
		}
		c.fire = append(c.fire, func() { done(err) })
	})
}

// Offsets are the group's committed offsets of tps (Offset -1 where it
// has none), or with tps nil all it has, sorted by topic and partition.
func (c *Coordinator) Offsets(name string, tps []TopicPartition) []Offset {
	defer c.run()
	var have map[TopicPartition]Offset
	if g := c.groups[name]; g != nil {
		have = g.offsets
	}
	if tps == nil {
		out := make([]Offset, 0, len(have))
		for _, tp := range sortedPartitions(have) {
			out = append(out, have[tp])
		}
		return out
	}
	out := make([]Offset, len(tps))
	for i, tp := range tps {
		o, ok := have[tp]
		if !ok {
			o = Offset{TopicPartition: tp, Offset: -1}
		}
		out[i] = o
	}
	return out
}

// DeleteOffsets forgets the group's committed offsets of tps
// (OffsetDelete); done runs once the tombstones are durable. Which
// partitions a group with members may drop (not those of topics it
// subscribes to) is the caller's rule: it reads the subscriptions.
func (c *Coordinator) DeleteOffsets(name string, tps []TopicPartition, done func(error)) {
	defer c.run()
	g := c.groups[name]
	if g == nil {
		err := fmt.Errorf("%w: %q", ErrUnknownGroup, name)
		c.fire = append(c.fire, func() { done(err) })
		return
	}
	recs := make([]Record, 0, len(tps))
	for _, tp := range tps {
		if _, ok := g.offsets[tp]; ok {
			recs = append(recs, Record{Key: OffsetKey(name, tp)})
		}
	}
	if len(recs) == 0 {
		c.fire = append(c.fire, func() { done(nil) })
		return
	}
	epoch := c.epoch
	c.persist(recs, func(err error) {
		defer c.run()
		if g := c.groups[name]; err == nil && c.epoch == epoch && g != nil {
			for _, tp := range tps {
				delete(g.offsets, tp)
			}
			c.dropIfBare(g)
		}
		c.fire = append(c.fire, func() { done(err) })
	})
}

// sortedPartitions are m's keys by topic, then partition.
func sortedPartitions(m map[TopicPartition]Offset) []TopicPartition {
	out := make([]TopicPartition, 0, len(m))
	for tp := range m {
		out = append(out, tp)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// CheckCommit says whether an offset commit may be stored: by a member
// of the current generation (it keeps the member's session), or, with
// generation -1 and no member id, by a consumer that assigns itself
// partitions while the group has no members.
func (c *Coordinator) CheckCommit(now time.Time, name, id string, gen int32) error {
	defer c.run()
	return c.checkCommit(now, name, id, gen)
}

// checkCommit is CheckCommit within a call that ends with run.
func (c *Coordinator) checkCommit(now time.Time, name, id string, gen int32) error {
	g := c.groups[name]
	if gen < 0 && id == "" {
		if g == nil || len(g.members) == 0 {
			return nil
		}
		return fmt.Errorf("%w: a commit without a generation, but group %q has members", ErrIllegalGeneration, name)
	}
	g, m, err := c.check(name, id, gen)
	if err != nil {
		return err
	}
	m.expires = now.Add(m.session)
	if g.state == CompletingRebalance {
		return ErrRebalanceInProgress
	}
	return nil
}
