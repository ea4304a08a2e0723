// Package frontend is what every client front end (the native protocol,
// the Kafka listener) shares on the data path, so that each protocol gets
// the same two optimisations from one place:
//
//   - lending the connection's read buffer to the log on produce (Lend),
//     so that a large batch is written from where it was read instead of
//     being copied;
//   - moving a connection whose data requests all go to partitions of one
//     other shard onto that shard (Mover), so that its requests run
//     inline there instead of paying two cross-thread hand-offs each.
//
// It speaks no protocol: a front end says which partitions a request
// names and when the request is done, and the package decides. Every
// call runs on the shard goroutine that owns the connection.
package frontend

import (
	"sync/atomic"

	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/shard"
)

// Lend is the lending hook a front end puts in a produce's
// service.ProduceRequest: the log calls it for a batch it writes in
// place, and it retains the read buffer the frame being delivered lies in
// (netio.Conn.Retain), or answers nil (the log copies) when the frame
// cannot be retained.
//
// The rule the front end must keep, the one native produce relies on:
// the records handed with it are a slice of the frame OnFrame is
// delivering for c, and the service is called before OnFrame returns.
// The service uses the hook only when it serves the partition on c's
// shard, within that call (segment.Lend: at most once per call, released
// exactly once); on another shard it copies the records. A request that
// carries several batches (a Kafka produce of several partitions) may
// lend each one: every call retains the buffer once more, and the buffer
// returns to the shard when the last release is called.
func Lend(c *netio.Conn) segment.Lend { return c.Retain }

// MigrateAfter is how many consecutive data requests for partitions of
// one other shard move a connection to that shard.
const MigrateAfter = 8

// Owners of a request: a shard index (>= 0), or one of these.
const (
	// NoOwner is a request that named no partition this node knows.
	NoOwner = -1
	// Spread is a request whose partitions are owned by several shards.
	Spread = -2
)

// Fold is the owner of a request whose partitions so far are owned by
// owner, once it also names one owned by shard (a shard index, or -1 for
// a partition this node does not know, which changes nothing). Start
// from NoOwner.
func Fold(owner, shard int) int {
	switch {
	case shard < 0 || owner == Spread:
		return owner
	case owner == NoOwner || owner == shard:
		return shard
	}
	return Spread
}

// Config is what a Mover is built from.
type Config struct {
	// Group is the node's shards, where connections move.
	Group *shard.Group
	// OwnerShard is the shard owning partition p of topic, -1 when the
	// topic or partition is unknown. Safe on any shard.
	OwnerShard func(topic string, p int32) int
	// Migrations counts the connections moved; CrossShard the data calls
	// served by a shard other than their connection's (two thread
	// hand-offs each). Nil counts nothing.
	Migrations *atomic.Uint64
	CrossShard *atomic.Uint64
}

// Mover moves one front end's connections to the shard their data
// requests go to. A nil Mover moves nothing and counts nothing (a front
// end built without shards, in tests).
type Mover struct {
	cfg Config
}

// NewMover builds a Mover. REQUIRES: cfg.Group and cfg.OwnerShard set.
func NewMover(cfg Config) *Mover { return &Mover{cfg: cfg} }

// Homing is one connection's progress toward moving: the front end keeps
// it in its per-connection state (the zero value is a new connection)
// and touches it only through the Mover, on the connection's shard.
type Homing struct {
	// target and streak count consecutive data requests for partitions
	// of one other shard. Invariant: streak > 0 only with target >= 0.
	target, streak int
	// open counts the data requests tracked and not yet done: the
	// connection moves only at 0, when no service call of its is
	// outstanding (a Kafka produce with acks 0 frees its in-flight slot
	// before its calls complete). Invariant: open >= 0.
	open int
	// migrating is set while the connection moves (Migrate accepted,
	// done not yet run).
	migrating bool
}

// Route is the shard that owns partition p of topic (-1 when unknown),
// for a service call c is about to make; a call another shard serves is
// counted as cross-shard.
func (m *Mover) Route(c *netio.Conn, topic string, p int32) int {
	if m == nil {
		return NoOwner
	}
	owner := m.cfg.OwnerShard(topic, p)
	if owner >= 0 && owner != c.Shard().ID() && m.cfg.CrossShard != nil {
		m.cfg.CrossShard.Add(1)
	}
	return owner
}

// Track counts a data request of c toward moving c, and returns what to
// run once the request is done: answered (or freed without an answer)
// and every service call it made completed. owner is the request's
// partitions' owner (Fold over Route's answers): a request for
// partitions of c's own shard, or of several shards, ends the streak; one
// naming no known partition leaves it as it is.
//
// REQUIRES: on c's shard; the returned function runs exactly once, on
// c's shard.
func (m *Mover) Track(c *netio.Conn, h *Homing, owner int) (done func()) {
	if m == nil {
		return func() {}
	}
	switch {
	case owner == NoOwner:
		return func() {}
	case owner == Spread || owner == c.Shard().ID():
		h.streak = 0
		return func() {}
	case owner == h.target:
		h.streak++
	default:
		h.target, h.streak = owner, 1
	}
	h.open++
	return func() {
		h.open--
		m.maybeMigrate(c, h)
	}
}

// maybeMigrate moves a connection whose requests all go to one other
// shard (a producer or consumer of partitions owned there) onto that
// shard, once it has nothing in flight: its requests then run inline,
// without two cross-thread hand-offs each. A connection that spreads its
// requests over shards stays where the kernel put it.
func (m *Mover) maybeMigrate(c *netio.Conn, h *Homing) {
	if h.streak < MigrateAfter || h.migrating || h.open > 0 || c.InFlight() > 0 || c.Closed() {
		return
	}
	h.migrating = true
	err := c.Migrate(m.cfg.Group.Shard(h.target), func(_ *netio.Conn, err error) {
		h.migrating, h.streak = false, 0
		if err == nil && m.cfg.Migrations != nil {
			m.cfg.Migrations.Add(1)
		}
	})
	if err != nil {
		h.migrating, h.streak = false, 0
	}
}

// MoveTo moves c to shard to at once (native Home): the streak starts
// again there. It returns Migrate's refusal; done runs as Migrate's,
// after the Homing is updated. REQUIRES: on c's shard, c idle.
func (m *Mover) MoveTo(c *netio.Conn, h *Homing, to int, done func(error)) error {
	h.migrating = true
	err := c.Migrate(m.cfg.Group.Shard(to), func(_ *netio.Conn, err error) {
		h.migrating, h.streak = false, 0
		if err == nil && m.cfg.Migrations != nil {
			m.cfg.Migrations.Add(1)
		}
		done(err)
	})
	if err != nil {
		h.migrating = false
	}
	return err
}

// Shards is the number of shards connections may move to.
func (m *Mover) Shards() int { return m.cfg.Group.Len() }

// Owner is the shard owning partition p of topic, -1 when unknown; it
// counts nothing.
func (m *Mover) Owner(topic string, p int32) int {
	if m == nil {
		return NoOwner
	}
	return m.cfg.OwnerShard(topic, p)
}
