// Package groups is the consumer group coordinator: Kafka's classic group
// protocol (join, sync, heartbeat, leave) and the checks an offset commit
// passes, as a state machine on an injected clock. It does no I/O and
// reads no clock: callers pass the time of each call and call Tick
// periodically, so tests drive timeouts with times, not sleeps. Where
// the coordinator runs and where offsets are stored is the node's
// business (docs/design/groups.md).
package groups

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"
)

// Sentinel errors, one per Kafka error code a client acts on.
var (
	// ErrUnknownMember: the member id is not in the group (it expired,
	// left, or never joined); the client rejoins with an empty id.
	ErrUnknownMember = errors.New("groups: unknown member id")
	// ErrIllegalGeneration: the request names another generation than
	// the group's; the client rejoins.
	ErrIllegalGeneration = errors.New("groups: illegal generation")
	// ErrRebalanceInProgress: the group is rebalancing; the client
	// rejoins.
	ErrRebalanceInProgress = errors.New("groups: rebalance in progress")
	// ErrMemberIDRequired: a JoinGroup v4+ without a member id; the
	// answer carries the id to join with (KIP-394).
	ErrMemberIDRequired = errors.New("groups: member id required")
	// ErrInconsistentProtocol: the member's protocol type or protocols
	// share nothing with the group's.
	ErrInconsistentProtocol = errors.New("groups: inconsistent group protocol")
	// ErrInvalidSessionTimeout: outside the configured bounds.
	ErrInvalidSessionTimeout = errors.New("groups: invalid session timeout")
	// ErrUnknownGroup: no such group (DeleteGroups, DescribeGroups).
	ErrUnknownGroup = errors.New("groups: unknown group")
	// ErrNonEmptyGroup: a group with members cannot be deleted.
	ErrNonEmptyGroup = errors.New("groups: group has members")
	// ErrGroupFull: the group has Config.MembersMax members.
	ErrGroupFull = errors.New("groups: group is full")
	// ErrTooManyGroups: the coordinator holds Config.GroupsMax groups.
	ErrTooManyGroups = errors.New("groups: too many groups")
	// ErrFencedInstance: a static member's instance id is held by
	// another member id (a newer instance of it joined).
	ErrFencedInstance = errors.New("groups: instance id fenced by a newer member")
	// ErrNotCoordinator: the coordinator was Reset while the call was
	// parked (its node lost the group's partition); the member finds
	// the new coordinator, which has its state, and retries there.
	ErrNotCoordinator = errors.New("groups: no longer the group's coordinator")
	// ErrTooManyOffsets: the commit would give the group more than
	// Config.OffsetsMax committed partitions.
	ErrTooManyOffsets = errors.New("groups: too many committed partitions")
	// ErrInvalidOffset: a commit of a negative offset.
	ErrInvalidOffset = errors.New("groups: invalid offset")
)

// State is a group's state, named as Kafka's DescribeGroups names it.
type State int8

const (
	Empty State = iota
	PreparingRebalance
	CompletingRebalance
	Stable
	Dead
)

// String is the state as Kafka clients and tools show it.
func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case PreparingRebalance:
		return "PreparingRebalance"
	case CompletingRebalance:
		return "CompletingRebalance"
	case Stable:
		return "Stable"
	}
	return "Dead"
}

// Config bounds the coordinator.
type Config struct {
	// SessionTimeoutMin and SessionTimeoutMax bound a member's session
	// timeout (Kafka's group.min/max.session.timeout.ms; the minimum is
	// lower than Kafka's 6 s so that tests and fast failover can use
	// shorter sessions).
	SessionTimeoutMin, SessionTimeoutMax time.Duration
	// MembersMax bounds a group (Kafka's group.max.size).
	MembersMax int
	// GroupsMax bounds the groups one coordinator holds.
	GroupsMax int
	// InitialRebalanceDelay holds the first rebalance of an empty group
	// this long (Kafka's group.initial.rebalance.delay.ms), so that
	// members starting together join one generation instead of one
	// rebalance each.
	InitialRebalanceDelay time.Duration
	// OffsetsMax bounds the partitions one group holds committed
	// offsets for; a commit that would pass it is refused whole.
	OffsetsMax int
	// CheckpointRecords and CheckpointBytes: a coordinator writes a
	// checkpoint of its state (checkpoint.go) once this many records,
	// or this many bytes of keys and values, went to its log since the
	// last one; 0 turns that bound off, both 0 turn checkpoints off.
	CheckpointRecords, CheckpointBytes int64
}

// DefaultConfig is what a node uses.
var DefaultConfig = Config{
	SessionTimeoutMin: time.Second, SessionTimeoutMax: 30 * time.Minute,
	MembersMax: 1000, GroupsMax: 100_000, InitialRebalanceDelay: 500 * time.Millisecond,
	OffsetsMax: 100_000, CheckpointRecords: 10_000, CheckpointBytes: 8 << 20,
}

// Protocol is one assignor a member supports, with its metadata (the
// subscription, opaque here).
type Protocol struct {
	Name     string
	Metadata []byte
}

// JoinRequest is a JoinGroup.
type JoinRequest struct {
	Group, MemberID string
	// InstanceID makes a static member (KIP-345, empty: dynamic): a
	// restart that joins with it takes the old member's place, and its
	// assignment when the group is stable, without a rebalance.
	InstanceID         string
	ClientID, Host     string
	ProtocolType       string
	Protocols          []Protocol
	SessionTimeout     time.Duration
	RebalanceTimeout   time.Duration
	RequireKnownMember bool
}

// MemberMeta is a member as the leader sees it: its id and its metadata
// for the chosen protocol.
type MemberMeta struct {
	ID       string
	Metadata []byte
}

// JoinResult answers a join. Members is filled for the leader only.
type JoinResult struct {
	Generation int32
	Protocol   string
	LeaderID   string
	MemberID   string
	Members    []MemberMeta
}

// SyncRequest is a SyncGroup; Assignments (member id → assignment) come
// from the leader only.
type SyncRequest struct {
	Group, MemberID string
	Generation      int32
	Assignments     map[string][]byte
}

// member is one member of a group.
type member struct {
	id, clientID, host string
	instance           string
	protocols          []Protocol
	session, rebalance time.Duration
	// expires is when the session runs out without a heartbeat.
	expires    time.Time
	assignment []byte
	// joinWait is the member's parked JoinGroup during a rebalance;
	// syncWait its parked SyncGroup while the leader has not synced.
	joinWait func(JoinResult, error)
	syncWait func([]byte, error)
}

// group is one group's state.
type group struct {
	name         string
	state        State
	generation   int32
	protocolType string
	protocol     string
	leader       string
	members      map[string]*member
	// pending are member ids handed out by MEMBER_ID_REQUIRED, with when
	// they lapse unjoined.
	pending map[string]time.Time
	// static maps static members' instance ids to their member ids.
	static map[string]string
	// rebalanceEnds is when a rebalance completes without the members
	// that did not rejoin; joinNotBefore when it may complete at the
	// earliest (the initial delay of an empty group).
	rebalanceEnds, joinNotBefore time.Time
	// offsets are the committed offsets whose records are durable.
	offsets map[TopicPartition]Offset
	// logged is the value of the newest group record queued for the
	// log or replayed (nil: none since the group was made), which a
	// checkpoint writes again.
	logged []byte
}

// newGroup is an empty group.
func newGroup(name string) *group {
	return &group{name: name, members: map[string]*member{}, pending: map[string]time.Time{},
		static: map[string]string{}, offsets: map[TopicPartition]Offset{}}
}

// Coordinator holds groups. Its methods are safe for concurrent use;
// callbacks run after its lock is released, on the caller's goroutine
// (of the call, of the Tick, or of the log's answer that completed
// them).
type Coordinator struct {
	cfg Config
	// log is where changes are made durable; nil keeps them in memory.
	log    Log
	mu     sync.Mutex
	groups map[string]*group
	nextID uint64
	// epoch counts Resets: a log answer for an append made before the
	// last Reset changes nothing in memory.
	epoch uint64
	// fire are the callbacks to run once the lock is released.
	fire []func()
	// outbox are the appends made under the lock, in order; flushing
	// says a goroutine is handing them to the log, so that the log sees
	// them in the order the state changed; inflight that the log has not
	// answered the last Append yet. One Append is in flight at a time:
	// what queues meanwhile goes to the log as one Append (up to
	// appendBytesMax), so that concurrent commits share a write.
	outbox   []appendCall
	flushing bool
	inflight bool
	// ckpt is the checkpoint writer's and replay's state (checkpoint.go).
	ckpt checkpointState
}

// appendBytesMax bounds the keys and values of the appends merged into
// one Append (one record batch on a node); a single append above it
// goes alone.
const appendBytesMax = 1 << 20

// Log is where a coordinator makes its records durable: on a node, the
// group's partition of the internal topic, produced with acks = quorum.
type Log interface {
	// Append makes recs durable after every record of earlier Appends
	// and then calls done(nil), or done(err) when they may not be
	// durable. done may run on any goroutine, also before Append
	// returns; it must be called exactly once.
	Append(recs []Record, done func(error))
}

// appendCall is one Append waiting in the outbox.
type appendCall struct {
	recs []Record
	done func(error)
	// checkpoint says recs are part of a checkpoint, which does not
	// count towards the next one.
	checkpoint bool
}

// New returns an empty coordinator that keeps its state in memory only.
func New(cfg Config) *Coordinator {
	return NewLogged(cfg, nil)
}

// NewLogged returns an empty coordinator that writes every change that
// must survive a failover to log before it answers the change (a
// commit, a leader's sync), and fills it by Replay of that log first.
func NewLogged(cfg Config, log Log) *Coordinator {
	return &Coordinator{cfg: cfg, log: log, groups: map[string]*group{}}
}

// run releases the lock, runs the callbacks queued under it and hands
// the queued appends to the log.
func (c *Coordinator) run() {
	f := c.fire
	c.fire = nil
	flush := len(c.outbox) > 0 && !c.flushing
	if flush {
		c.flushing = true
	}
	c.mu.Unlock()
	for _, fn := range f {
		fn()
	}
	if flush {
		c.flush()
	}
}

// flush hands the outbox to the log in order: while no Append is in
// flight, the queued appends (up to appendBytesMax) as one Append, whose
// answer answers each of them and flushes what queued meanwhile. One
// goroutine flushes at a time; a done the log runs inside Append is
// taken care of by the loop.
func (c *Coordinator) flush() {
	for {
		c.mu.Lock()
		if c.inflight || len(c.outbox) == 0 {
			c.flushing = false
			c.mu.Unlock()
			return
		}
		c.maybeCheckpoint()
		n, size := 0, 0
		for _, a := range c.outbox {
			s := a.bytes()
			if n > 0 && size+s > appendBytesMax {
				break
			}
			n, size = n+1, size+s
		}
		batch := append([]appendCall(nil), c.outbox[:n]...)
		c.outbox = c.outbox[n:]
		c.inflight = true
		c.countWritten(batch)
		c.mu.Unlock()
		var recs []Record
		for _, a := range batch {
			recs = append(recs, a.recs...)
		}
		c.log.Append(recs, func(err error) {
			for _, a := range batch {
				a.done(err)
			}
			c.mu.Lock()
			c.inflight = false
			more := len(c.outbox) > 0 && !c.flushing
			if more {
				c.flushing = true
			}
			c.mu.Unlock()
			if more {
				c.flush()
			}
		})
	}
}

// bytes are a's keys and values.
func (a appendCall) bytes() int {
	n := 0
	for _, r := range a.recs {
		n += len(r.Key) + len(r.Value)
	}
	return n
}

// persist queues recs for the log; done (may be nil) runs with the
// log's answer, without the lock held. Without a log done is answered
// nil once the lock is released.
// REQUIRES: c.mu held.
func (c *Coordinator) persist(recs []Record, done func(error)) {
	if done == nil {
		done = func(error) {}
	}
	if c.log == nil {
		c.fire = append(c.fire, func() { done(nil) })
		return
	}
	c.outbox = append(c.outbox, appendCall{recs: recs, done: done})
}

// persistGroup queues g's metadata record; nothing waits on it.
// REQUIRES: c.mu held.
func (c *Coordinator) persistGroup(g *group) {
	c.persist([]Record{c.groupRecord(g)}, nil)
}

// groupRecord is g's metadata record, kept as the group's newest one
// queued for the log: a checkpoint writes it again.
// REQUIRES: c.mu held.
func (c *Coordinator) groupRecord(g *group) Record {
	g.logged = encodeGroup(g.image())
	return Record{Key: GroupKey(g.name), Value: g.logged}
}

// image is what g's record holds.
func (g *group) image() groupImage {
	im := groupImage{generation: g.generation, protocolType: g.protocolType, protocol: g.protocol, leader: g.leader}
	for _, id := range g.sortedIDs() {
		m := g.members[id]
		im.members = append(im.members, memberImage{id: id, instance: m.instance, clientID: m.clientID, host: m.host,
			session: m.session, rebalance: m.rebalance, metadata: m.metadata(g.protocol), assignment: m.assignment})
	}
	return im
}

// Reset drops every group, answering parked calls with
// ErrNotCoordinator: the node stopped coordinating (its members find
// the new coordinator, which replayed their state from the log).
// Appends already queued still go to the log; their answers change
// nothing here.
func (c *Coordinator) Reset() {
	c.mu.Lock()
	for _, g := range c.groups {
		for _, m := range g.members {
			c.failWaits(m, ErrNotCoordinator)
		}
	}
	c.groups = map[string]*group{}
	c.epoch++
	c.ckpt.serving = false // an empty state must never be written as a checkpoint
	c.run()
}

// failWaits answers m's parked calls with err.
func (c *Coordinator) failWaits(m *member, err error) {
	if w := m.joinWait; w != nil {
		m.joinWait = nil
		c.fire = append(c.fire, func() { w(JoinResult{MemberID: m.id, Generation: -1}, err) })
	}
	if w := m.syncWait; w != nil {
		m.syncWait = nil
		c.fire = append(c.fire, func() { w(nil, err) })
	}
}

// Join handles a JoinGroup; done runs once, when the rebalance completes
// or the request is refused.
func (c *Coordinator) Join(now time.Time, req JoinRequest, done func(JoinResult, error)) {
	c.mu.Lock()
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
	c.mu.Lock()
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
	for _, m := range g.members {
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
		all = append(all, MemberMeta{ID: id, Metadata: g.members[id].metadata(g.protocol)})
	}
	for _, m := range g.members {
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

// Sync handles a SyncGroup; done runs once with the member's assignment.
func (c *Coordinator) Sync(now time.Time, req SyncRequest, done func([]byte, error)) {
	c.mu.Lock()
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
// the parked syncs with it; when the log fails them, they are answered
// its error and the group rebalances (its members rejoin), as a Kafka
// coordinator does when it cannot store the group.
// REQUIRES: c.mu held.
func (c *Coordinator) completeSync(g *group, now time.Time) {
	type wait struct {
		w func([]byte, error)
		a []byte
	}
	var waits []wait
	for _, mm := range g.members {
		if w := mm.syncWait; w != nil {
			mm.syncWait = nil
			waits = append(waits, wait{w, mm.assignment})
		}
	}
	epoch, gen := c.epoch, g.generation
	c.persist([]Record{c.groupRecord(g)}, func(err error) {
		c.mu.Lock()
		defer c.run()
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

// Heartbeat keeps a member's session; during a rebalance it answers
// ErrRebalanceInProgress, which makes the member rejoin.
func (c *Coordinator) Heartbeat(now time.Time, name, id string, gen int32) error {
	c.mu.Lock()
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
	c.mu.Lock()
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
	c.mu.Lock()
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

// CheckCommit says whether an offset commit may be stored: by a member
// of the current generation (it keeps the member's session), or, with
// generation -1 and no member id, by a consumer that assigns itself
// partitions while the group has no members.
func (c *Coordinator) CheckCommit(now time.Time, name, id string, gen int32) error {
	c.mu.Lock()
	defer c.run()
	return c.checkCommit(now, name, id, gen)
}

// checkCommit is CheckCommit under the lock.
// REQUIRES: c.mu held.
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

// MemberDescription is one member as DescribeGroups shows it.
type MemberDescription struct {
	ID, InstanceID, ClientID, Host string
	Metadata                       []byte
	Assignment                     []byte
}

// Description is a group as DescribeGroups shows it.
type Description struct {
	Name         string
	State        State
	ProtocolType string
	Protocol     string
	Generation   int32
	Members      []MemberDescription
}

// Describe is a group's state; ErrUnknownGroup when the coordinator
// holds no such group.
func (c *Coordinator) Describe(name string) (Description, error) {
	c.mu.Lock()
	defer c.run()
	g := c.groups[name]
	if g == nil {
		return Description{Name: name, State: Dead}, fmt.Errorf("%w: %q", ErrUnknownGroup, name)
	}
	d := Description{Name: name, State: g.state, ProtocolType: g.protocolType, Protocol: g.protocol, Generation: g.generation}
	for _, id := range g.sortedIDs() {
		m := g.members[id]
		d.Members = append(d.Members, MemberDescription{ID: id, InstanceID: m.instance, ClientID: m.clientID, Host: m.host,
			Metadata: m.metadata(g.protocol), Assignment: m.assignment})
	}
	return d, nil
}

// List describes every group, sorted by name, without members.
func (c *Coordinator) List() []Description {
	c.mu.Lock()
	defer c.run()
	out := make([]Description, 0, len(c.groups))
	for _, g := range c.groups {
		out = append(out, Description{Name: g.name, State: g.state, ProtocolType: g.protocolType, Protocol: g.protocol, Generation: g.generation})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Delete forgets an empty group and its committed offsets. It answers
// at once; the tombstones follow every earlier record into the log, so
// a coordinator that replays the log does not find the group again
// unless the log lost them (then the group, empty, is deleted again).
func (c *Coordinator) Delete(name string) error {
	c.mu.Lock()
	defer c.run()
	g := c.groups[name]
	switch {
	case g == nil:
		return fmt.Errorf("%w: %q", ErrUnknownGroup, name)
	case len(g.members) > 0:
		return fmt.Errorf("%w: %q has %d", ErrNonEmptyGroup, name, len(g.members))
	}
	recs := make([]Record, 0, len(g.offsets)+1)
	for _, tp := range sortedPartitions(g.offsets) {
		recs = append(recs, Record{Key: OffsetKey(name, tp)})
	}
	recs = append(recs, Record{Key: GroupKey(name)})
	delete(c.groups, name)
	c.persist(recs, nil)
	return nil
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
