package groups

// The outbox: every change that must survive a failover goes to the
// coordinator's Log in the order the state changed, one Append in
// flight at a time, what queues meanwhile merged into the next one.

// run ends a call: it runs the callbacks the call queued (once the
// state change is complete, so that a callback may call the coordinator
// again) and hands the queued appends to the log.
func (c *Coordinator) run() {
	f := c.fire
	c.fire = nil
	flush := len(c.outbox) > 0 && !c.flushing
	if flush {
		c.flushing = true
	}
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
// flush runs at a time (flushing); a done the log runs inside Append is
// taken care of by the loop.
func (c *Coordinator) flush() {
	for {
		if c.inflight || len(c.outbox) == 0 {
			c.flushing = false
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
		var recs []Record
		for _, a := range batch {
			recs = append(recs, a.recs...)
		}
		c.log.Append(recs, func(err error) {
			for _, a := range batch {
				a.done(err)
			}
			c.inflight = false
			more := len(c.outbox) > 0 && !c.flushing
			if more {
				c.flushing = true
			}
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
// log's answer. Without a log done is answered nil when the call ends
// (run).
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
func (c *Coordinator) persistGroup(g *group) {
	c.persist([]Record{c.groupRecord(g)}, nil)
}

// groupRecord is g's metadata record, kept as the group's newest one
// queued for the log: a checkpoint writes it again.
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
