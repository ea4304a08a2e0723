package groups

import (
	"fmt"
	"time"
)

// SyncGroup: the leader hands out the generation's assignment, which is
// made durable before any member is answered with its part of it.

// Sync handles a SyncGroup; done runs once with the member's assignment.
func (c *Coordinator) Sync(now time.Time, req SyncRequest, done func([]byte, error)) {
	defer c.run()
	g, m, err := c.check(req.Group, req.MemberID, req.Generation)
	if err != nil {
		c.fire = append(c.fire, func() { done(nil, err) })
		return
	}
	m.expires = now.Add(m.session)
	switch g.state {
	case PreparingRebalance:
		c.fire = append(c.fire, func() { done(nil, ErrRebalanceInProgress) })
	case Stable:
		if g.storing == g.generation {
			// The leader's assignment is not durable yet: answered with
			// it, this member could hold a generation that a new
			// coordinator never hears of. It waits for the record.
			if w := m.syncWait; w != nil {
				c.fire = append(c.fire, func() { w(nil, ErrRebalanceInProgress) })
			}
			m.syncWait = done
			return
		}
		a := m.assignment
		c.fire = append(c.fire, func() { done(a, nil) })
	case CompletingRebalance:
		if w := m.syncWait; w != nil {
			c.fire = append(c.fire, func() { w(nil, ErrRebalanceInProgress) })
		}
		m.syncWait = done
		if req.MemberID != g.leader {
			return
		}
		for id, mm := range g.members {
			mm.assignment = req.Assignments[id]
		}
		g.state = Stable
		c.completeSync(g, now)
	}
}

// completeSync makes the leader's assignment durable and then answers
// the parked syncs with it, and those that arrived while it was being
// written; when the log fails them, they are answered its error and the
// group rebalances (its members rejoin), as a Kafka coordinator does
// when it cannot store the group.
func (c *Coordinator) completeSync(g *group, now time.Time) {
	type wait struct {
		w func([]byte, error)
		a []byte
	}
	var waits []wait
	for _, id := range g.sortedIDs() {
		mm := g.members[id]
		if w := mm.syncWait; w != nil {
			mm.syncWait = nil
			waits = append(waits, wait{w, mm.assignment})
		}
	}
	epoch, gen := c.epoch, g.generation
	g.storing = gen
	c.persist([]Record{c.groupRecord(g)}, func(err error) {
		defer c.run()
		if c.epoch == epoch && c.groups[g.name] == g && g.storing == gen {
			g.storing = 0
			if g.generation == gen && g.state == Stable {
				for _, id := range g.sortedIDs() {
					if mm := g.members[id]; mm.syncWait != nil {
						waits = append(waits, wait{mm.syncWait, mm.assignment})
						mm.syncWait = nil
					}
				}
			}
		}
		if err != nil && c.epoch == epoch && c.groups[g.name] == g && g.generation == gen && g.state == Stable {
			c.prepareRebalance(g, now)
		}
		for _, w := range waits {
			w, a := w.w, w.a
			if err != nil {
				a = nil
			}
			c.fire = append(c.fire, func() { w(a, err) })
		}
	})
}

// check finds the member of a live group at generation gen.
func (c *Coordinator) check(name, id string, gen int32) (*group, *member, error) {
	g := c.groups[name]
	if g == nil || g.state == Dead {
		return nil, nil, fmt.Errorf("%w: group %q has no members", ErrUnknownMember, name)
	}
	m := g.members[id]
	if m == nil {
		return g, nil, fmt.Errorf("%w: %q is not a member of group %q", ErrUnknownMember, id, name)
	}
	if gen != g.generation {
		return g, m, fmt.Errorf("%w: %d, the group is at generation %d", ErrIllegalGeneration, gen, g.generation)
	}
	return g, m, nil
}
