package groups

import (
	"fmt"
	"sort"
	"strconv"
	"time"
)

// JoinGroup: members join (or rejoin) a group, a rebalance gathers
// them, and the generation completes when all rejoined or the
// rebalance timed out; static members (KIP-345) take their old place.

// Join handles a JoinGroup; done runs once, when the rebalance completes
// or the request is refused.
func (c *Coordinator) Join(now time.Time, req JoinRequest, done func(JoinResult, error)) {
	defer c.run()
	fail := func(err error) {
		c.fire = append(c.fire, func() { done(JoinResult{MemberID: req.MemberID, Generation: -1}, err) })
	}
	if req.SessionTimeout < c.cfg.SessionTimeoutMin || req.SessionTimeout > c.cfg.SessionTimeoutMax {
		fail(fmt.Errorf("%w: %v is outside [%v, %v]", ErrInvalidSessionTimeout, req.SessionTimeout, c.cfg.SessionTimeoutMin, c.cfg.SessionTimeoutMax))
		return
	}
	if req.ProtocolType == "" || len(req.Protocols) == 0 {
		fail(fmt.Errorf("%w: no protocol type or no protocols", ErrInconsistentProtocol))
		return
	}
	if req.RebalanceTimeout <= 0 {
		req.RebalanceTimeout = req.SessionTimeout
	}
	g := c.groups[req.Group]
	if g == nil {
		if len(c.groups) >= c.cfg.GroupsMax {
			fail(fmt.Errorf("%w: %d", ErrTooManyGroups, c.cfg.GroupsMax))
			return
		}
		g = newGroup(req.Group)
		c.groups[req.Group] = g
	}
	if len(g.members) > 0 {
		if req.ProtocolType != g.protocolType || !g.supportsAny(req.Protocols) {
			fail(fmt.Errorf("%w: type %q, protocols %v do not match the group's", ErrInconsistentProtocol, req.ProtocolType, names(req.Protocols)))
			return
		}
	}
	if req.InstanceID != "" {
		if c.joinStatic(g, now, req, done) {
			return
		}
	}
	id := req.MemberID
	m := g.members[id]
	switch {
	case id == "":
		if len(g.members)+len(g.pending) >= c.cfg.MembersMax {
			fail(fmt.Errorf("%w: %d members", ErrGroupFull, c.cfg.MembersMax))
			return
		}
		c.nextID++
		id = req.ClientID + "-" + strconv.FormatUint(c.nextID, 10)
		if req.InstanceID != "" {
			// Kafka's form, which clients read the leader's instance
			// from (KIP-345).
			id = req.InstanceID + "-" + strconv.FormatUint(c.nextID, 10)
		}
		if req.RequireKnownMember && req.InstanceID == "" {
			g.pending[id] = now.Add(req.SessionTimeout)
			c.fire = append(c.fire, func() { done(JoinResult{MemberID: id, Generation: -1}, ErrMemberIDRequired) })
			return
		}
	case m == nil:
		if _, ok := g.pending[id]; !ok {
			fail(fmt.Errorf("%w: %q is not a member of group %q", ErrUnknownMember, id, req.Group))
			return
		}
		delete(g.pending, id)
	}
	if m == nil {
		m = &member{id: id, instance: req.InstanceID}
		g.members[id] = m
		if req.InstanceID != "" {
			g.static[req.InstanceID] = id
		}
	} else if m.joinWait != nil {
		// A rejoin replaces the parked join (the client gave up on it).
		old := m.joinWait
		c.fire = append(c.fire, func() { old(JoinResult{MemberID: id, Generation: -1}, ErrRebalanceInProgress) })
	}
	m.clientID, m.host, m.protocols = req.ClientID, req.Host, req.Protocols
	m.session, m.rebalance = req.SessionTimeout, req.RebalanceTimeout
	m.expires = now.Add(req.SessionTimeout)
	m.joinWait = done
	g.protocolType = req.ProtocolType
	if g.state != PreparingRebalance {
		if g.state == Empty {
			g.joinNotBefore = now.Add(c.cfg.InitialRebalanceDelay)
		}
		c.prepareRebalance(g, now)
	}
	c.maybeCompleteJoin(g, now, false)
}

// joinStatic handles the join of a known static instance and says
// whether it answered it: a join with another member id than the
// instance's is fenced; one with no member id replaces the old member
// (whose parked calls are fenced) under a new id and, in a stable group,
// is answered at once with the current generation and the old member's
// assignment (its SyncGroup returns it), without a rebalance.
func (c *Coordinator) joinStatic(g *group, now time.Time, req JoinRequest, done func(JoinResult, error)) bool {
	oldID, ok := g.static[req.InstanceID]
	if !ok {
		return false
	}
	old := g.members[oldID]
	if old == nil {
		delete(g.static, req.InstanceID)
		return false
	}
	if req.MemberID != "" {
		if req.MemberID != oldID {
			c.fire = append(c.fire, func() { done(JoinResult{MemberID: req.MemberID, Generation: -1}, ErrFencedInstance) })
			return true
		}
		return false // the member itself rejoining: the usual path
	}
	c.failWaits(old, ErrFencedInstance)
	c.nextID++
	id := req.InstanceID + "-" + strconv.FormatUint(c.nextID, 10)
	delete(g.members, oldID)
	old.id = id
	g.members[id] = old
	g.static[req.InstanceID] = id
	if g.leader == oldID {
		g.leader = id
	}
	old.clientID, old.host, old.protocols = req.ClientID, req.Host, req.Protocols
	old.session, old.rebalance = req.SessionTimeout, req.RebalanceTimeout
	old.expires = now.Add(req.SessionTimeout)
	if g.state != Stable {
		old.joinWait = done
		if g.state != PreparingRebalance {
			c.prepareRebalance(g, now)
		}
		c.maybeCompleteJoin(g, now, false)
		return true
	}
	// The new id must survive a failover, or the restarted instance is
	// unknown to the next coordinator.
	c.persistGroup(g)
	res := JoinResult{Generation: g.generation, Protocol: g.protocol, LeaderID: g.leader, MemberID: id}
	c.fire = append(c.fire, func() { done(res, nil) })
	return true
}

// MemberOfInstance is the member id of a static instance ("" when none):
// LeaveGroup v3+ may name a member by its instance only.
func (c *Coordinator) MemberOfInstance(name, instance string) string {
	defer c.run()
	if g := c.groups[name]; g != nil {
		return g.static[instance]
	}
	return ""
}

// prepareRebalance starts a rebalance: parked syncs are told to rejoin,
// and the rebalance ends at the longest rebalance timeout from now.
func (c *Coordinator) prepareRebalance(g *group, now time.Time) {
	g.state = PreparingRebalance
	var longest time.Duration
	for _, id := range g.sortedIDs() {
		m := g.members[id]
		if w := m.syncWait; w != nil {
			m.syncWait = nil
			c.fire = append(c.fire, func() { w(nil, ErrRebalanceInProgress) })
		}
		if m.rebalance > longest {
			longest = m.rebalance
		}
	}
	g.rebalanceEnds = now.Add(longest)
}

// maybeCompleteJoin ends the rebalance when every member rejoined, or,
// with timedOut, without the members that did not.
func (c *Coordinator) maybeCompleteJoin(g *group, now time.Time, timedOut bool) {
	if g.state != PreparingRebalance || !timedOut && now.Before(g.joinNotBefore) {
		return
	}
	for id, m := range g.members {
		if m.joinWait == nil {
			if !timedOut {
				return
			}
			delete(g.members, id)
		}
	}
	g.generation++
	if len(g.members) == 0 {
		g.state, g.protocol, g.leader = Empty, "", ""
		c.persistGroup(g)
		return
	}
	g.state = CompletingRebalance
	g.protocol = g.chooseProtocol()
	if _, ok := g.members[g.leader]; !ok {
		g.leader = g.sortedIDs()[0]
	}
	var all []MemberMeta
	for _, id := range g.sortedIDs() {
		all = append(all, MemberMeta{ID: id, InstanceID: g.members[id].instance, Metadata: g.members[id].metadata(g.protocol)})
	}
	for _, id := range g.sortedIDs() {
		m := g.members[id]
		m.assignment = nil
		m.expires = now.Add(m.session)
		res := JoinResult{Generation: g.generation, Protocol: g.protocol, LeaderID: g.leader, MemberID: m.id}
		if m.id == g.leader {
			res.Members = all
		}
		w := m.joinWait
		m.joinWait = nil
		c.fire = append(c.fire, func() { w(res, nil) })
	}
}

// supportsAny says whether one of ps is supported by every member.
func (g *group) supportsAny(ps []Protocol) bool {
	for _, p := range ps {
		if g.allSupport(p.Name) {
			return true
		}
	}
	return false
}

func (g *group) allSupport(name string) bool {
	for _, m := range g.members {
		if !m.has(name) {
			return false
		}
	}
	return true
}

// chooseProtocol is Kafka's vote: each member votes for the first of its
// protocols (in its preference order) that every member supports; the
// most votes win, ties to the name first in order.
func (g *group) chooseProtocol() string {
	votes := map[string]int{}
	for _, m := range g.members {
		for _, p := range m.protocols {
			if g.allSupport(p.Name) {
				votes[p.Name]++
				break
			}
		}
	}
	best, n := "", -1
	for name, v := range votes {
		if v > n || v == n && name < best {
			best, n = name, v
		}
	}
	return best
}

func (g *group) sortedIDs() []string {
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (m *member) has(name string) bool {
	for _, p := range m.protocols {
		if p.Name == name {
			return true
		}
	}
	return false
}

func (m *member) metadata(name string) []byte {
	for _, p := range m.protocols {
		if p.Name == name {
			if p.Metadata == nil {
				return []byte{}
			}
			return p.Metadata
		}
	}
	return nil
}

func names(ps []Protocol) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}
