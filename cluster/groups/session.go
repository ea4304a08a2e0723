package groups

import (
	"fmt"
	"sort"
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
// The groups with something to do are handled in name order, their
// members in id order, so that the answers and records of one tick come
// out in the same order on every run (a simulated seed replays).
func (c *Coordinator) Tick(now time.Time) {
	defer c.run()
	var due []*group
	for _, g := range c.groups {
		for id, at := range g.pending {
			if now.After(at) {
				delete(g.pending, id)
			}
		}
		if g.state == PreparingRebalance || g.expired(now) {
			due = append(due, g)
		}
	}
	sort.Slice(due, func(i, j int) bool { return due[i].name < due[j].name })
	for _, g := range due {
		removed := false
		for _, id := range g.sortedIDs() {
			// A member parked in a join or a sync waits on the others
			// (the rebalance timeout, the leader's session), not on
			// its own session.
			if m := g.members[id]; m.joinWait == nil && m.syncWait == nil && now.After(m.expires) {
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

// expired says whether a member of g that is not parked ran out of its
// session at now.
func (g *group) expired(now time.Time) bool {
	for _, m := range g.members {
		if m.joinWait == nil && m.syncWait == nil && now.After(m.expires) {
			return true
		}
	}
	return false
}
