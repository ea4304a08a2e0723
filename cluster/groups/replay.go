package groups

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Replay applies one record of the coordinator's log, read back in log
// order, to a coordinator that serves no requests yet: the node replays
// its partition of the internal topic before it answers for the groups
// that live there. A group record makes the group as it was stored
// (Stable with its members and their assignments, or Empty), every
// member's session starting at now; an offset record sets one committed
// offset; a tombstone removes what its key names. Replaying every
// prefix of a log gives the state the coordinator had when it had
// written that prefix. A complete checkpoint resets the state to what
// it holds, and one without its end changes nothing (checkpoint.go).
// ErrCorruptRecord for a record it cannot read; nothing is changed then.
func (c *Coordinator) Replay(now time.Time, rec Record) error {
	defer c.run()
	k := string(rec.Key)
	switch {
	case k == loadKey, k == checkpointBeginKey, k == checkpointEndKey:
		return c.replayCheckpointMarker(k, rec.Value)
	case strings.HasPrefix(k, groupKeyPrefix), strings.HasPrefix(k, offsetKeyPrefix):
		return c.replayInto(rec, func() error { return c.replayRecord(now, k, rec) })
	case strings.HasPrefix(k, txnKeyPrefix):
		return c.replayInto(rec, func() error { return c.replayStaged(k, rec) })
	}
	return fmt.Errorf("%w: key %q is neither a group nor an offset", ErrCorruptRecord, k)
}

// replayRecord applies a group or offset record to c.groups.
func (c *Coordinator) replayRecord(now time.Time, k string, rec Record) error {
	switch {
	case strings.HasPrefix(k, groupKeyPrefix):
		name := k[len(groupKeyPrefix):]
		if name == "" {
			return fmt.Errorf("%w: group key without a name", ErrCorruptRecord)
		}
		if rec.IsTombstone() {
			c.replayGroupTombstone(name)
			return nil
		}
		im, err := decodeGroup(rec.Value)
		if err != nil {
			return fmt.Errorf("%w (key %q)", err, k)
		}
		c.replayGroup(now, name, im)
		c.groups[name].logged = rec.Value
		return nil
	case strings.HasPrefix(k, offsetKeyPrefix):
		name, tp, err := parseOffsetKey(k)
		if err != nil {
			return err
		}
		if rec.IsTombstone() {
			if g := c.groups[name]; g != nil {
				delete(g.offsets, tp)
				c.dropIfBare(g)
			}
			return nil
		}
		o := Offset{TopicPartition: tp}
		if err := decodeOffset(rec.Value, &o); err != nil {
			return fmt.Errorf("%w (key %q)", err, k)
		}
		c.groupFor(name).offsets[tp] = o
		return nil
	}
	return fmt.Errorf("%w: key %q is neither a group nor an offset", ErrCorruptRecord, k)
}

// replayStaged applies a staged offset's record (or its tombstone, the
// transaction's end) to c.staged.
func (c *Coordinator) replayStaged(k string, rec Record) error {
	name, pid, tp, err := parseTxnOffsetKey(k)
	if err != nil {
		return err
	}
	if rec.IsTombstone() {
		c.unstage(pid, name, tp)
		return nil
	}
	o := Offset{TopicPartition: tp}
	if err := decodeOffset(rec.Value, &o); err != nil {
		return fmt.Errorf("%w (key %q)", err, k)
	}
	c.stage(pid, name, o)
	return nil
}

// groupFor is the group named, made empty when there is none. Replay
// does not refuse past GroupsMax: the log holds what was accepted.
func (c *Coordinator) groupFor(name string) *group {
	g := c.groups[name]
	if g == nil {
		g = newGroup(name)
		c.groups[name] = g
	}
	return g
}

// replayGroup sets a group's membership from its record.
func (c *Coordinator) replayGroup(now time.Time, name string, im groupImage) {
	g := c.groupFor(name)
	g.generation, g.protocolType, g.protocol, g.leader = im.generation, im.protocolType, im.protocol, im.leader
	g.members, g.static, g.pending = map[string]*member{}, map[string]string{}, map[string]time.Time{}
	g.state = Empty
	if len(im.members) > 0 {
		g.state = Stable
	}
	for _, mi := range im.members {
		m := &member{id: mi.id, instance: mi.instance, clientID: mi.clientID, host: mi.host,
			protocols: []Protocol{{Name: im.protocol, Metadata: mi.metadata}},
			session:   mi.session, rebalance: mi.rebalance, expires: now.Add(mi.session), assignment: mi.assignment}
		g.members[mi.id] = m
		if mi.instance != "" {
			g.static[mi.instance] = mi.id
		}
		c.noteID(mi.id)
	}
}

// replayGroupTombstone forgets a group (Delete writes its offsets'
// tombstones first); a group that still holds offsets keeps them, Empty.
func (c *Coordinator) replayGroupTombstone(name string) {
	g := c.groups[name]
	if g == nil {
		return
	}
	g.logged = nil
	if len(g.offsets) == 0 {
		delete(c.groups, name)
		return
	}
	g.members, g.static, g.pending = map[string]*member{}, map[string]string{}, map[string]time.Time{}
	g.state, g.protocol, g.leader = Empty, "", ""
}

// dropIfBare forgets a group that never completed a join (generation 0:
// it has no group record) and holds no offsets: one only commits made,
// whose offsets are all deleted.
func (c *Coordinator) dropIfBare(g *group) {
	if len(g.members) == 0 && len(g.offsets) == 0 && g.generation == 0 {
		delete(c.groups, g.name)
	}
}

// noteID keeps the member ids the coordinator hands out from now on
// past a replayed one (ids end in "-<n>"), so a new member never takes
// the id of one found in the log.
func (c *Coordinator) noteID(id string) {
	i := strings.LastIndexByte(id, '-')
	if i < 0 {
		return
	}
	if n, err := strconv.ParseUint(id[i+1:], 10, 64); err == nil && n > c.nextID {
		c.nextID = n
	}
}
