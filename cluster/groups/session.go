package groups

import (
	"fmt"
	"time"
)

// Sessions: heartbeats keep a member, LeaveGroup and expired sessions
// remove it, and Tick ends sessions and rebalances that ran out of time.

// Heartbeat keeps a member's session; during a rebalance it answers
// ErrRebalanceInProgress, which makes the member rejoin.
func (c *Coordinator) Heartbeat(now time.Time, name, id string, gen int32) error {
	defer c.run()
	g, m, err := c.check(name, id, gen)
	if err != nil {
		return err
	}
	m.expires = now.Add(m.session)
	if g.state == PreparingRebalance {
		return ErrRebalanceInProgress
	}
	return nil
}

// Leave removes members (LeaveGroup); one error per id, in order.
func (c *Coordinator) Leave(now time.Time, name string, ids []string) []error {
	defer c.run()
	errs := make([]error, len(ids))
	g := c.groups[name]
	left := false
	for i, id := range ids {
		var m *member
		if g != nil {
			m = g.members[id]
		}
		if m == nil {
			errs[i] = fmt.Errorf("%w: %q is not a member of group %q", ErrUnknownMember, id, name)
			continue
		}
		c.remove(g, m)
		left = true
	}
	if left {
		c.afterRemoval(g, now)
	}
	return errs
}

// remove takes m out of g, answering its parked calls.
func (c *Coordinator) remove(g *group, m *member) {
	c.failWaits(m, ErrUnknownMember)
	delete(g.members, m.id)
	if m.instance != "" && g.static[m.instance] == m.id {
		delete(g.static, m.instance)
	}
}

// afterRemoval rebalances the members that remain.
func (c *Coordinator) afterRemoval(g *group, now time.Time) {
	if len(g.members) == 0 {
		g.state, g.protocol, g.leader = Empty, "", ""
		g.generation++
		c.persistGroup(g)
		return
	}
	if g.state != PreparingRebalance {
		c.prepareRebalance(g, now)
	}
	c.maybeCompleteJoin(g, now, false)
}

// Tick expires sessions and ends rebalances that ran out of time. A
// member parked in a join is not expired (it is waiting on the others).
func (c *Coordinator) Tick(now time.Time) {
	defer c.run()
	for _, g := range c.groups {
		for id, at := range g.pending {
			if now.After(at) {
				delete(g.pending, id)
			}
		}
		removed := false
		for _, m := range g.members {
			// A member parked in a join or a sync waits on the others
			// (the rebalance timeout, the leader's session), not on
			// its own session.
			if m.joinWait == nil && m.syncWait == nil && now.After(m.expires) {
				c.remove(g, m)
				removed = true
			}
		}
		if removed {
			c.afterRemoval(g, now)
		}
		if g.state == PreparingRebalance {
			c.maybeCompleteJoin(g, now, now.After(g.rebalanceEnds))
		}
	}
}
