package client

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/corestream/corestream/netio/wire"
)

// The member goroutine of a GroupConsumer: join, sync, take the
// assignment, heartbeat until the group rebalances, hand the partitions
// back (through Poll), and again.

// leaveReason says why a generation ended for this member.
type leaveReason int

const (
	// reasonRebalance: the group rebalances (a member joined or left, the
	// subscription changed); the member may still commit, then rejoins.
	reasonRebalance leaveReason = iota
	// reasonFenced: the group moved on without this member (another
	// generation, an unknown member id, a session that ran out): its
	// commits would be refused.
	reasonFenced
	// reasonClosed: the consumer or its client closes.
	reasonClosed
)

// run is the member goroutine. Every loop is one generation; it ends
// when the consumer closes.
func (g *GroupConsumer) run() {
	defer close(g.done)
	failures := 0
	for g.ctx.Err() == nil {
		res, err := g.join()
		if err == nil {
			var parts []wire.TopicPartition
			if parts, err = g.sync(res); err == nil {
				failures = 0
				err = g.apply(res, parts)
				if err != nil && g.ctx.Err() != nil {
					// Closed while taking the assignment (Poll may
					// have returned records of the partitions taken
					// so far): Close commits and leaves under this
					// generation, as after a heartbeat.
					return
				}
				reason := reasonFenced
				if err == nil {
					reason = g.heartbeat()
				}
				if reason == reasonClosed {
					return // Close commits and leaves under this generation
				}
				g.revokeAll(reason == reasonRebalance)
				g.setGeneration(-1)
				continue
			}
		}
		if errors.Is(err, ErrClosed) || g.ctx.Err() != nil {
			return
		}
		if errors.Is(err, wire.ErrUnknownMember) || errors.Is(err, wire.ErrFencedInstance) {
			g.mu.Lock()
			g.memberID = ""
			g.mu.Unlock()
		}
		// A rebalance that started while joining or syncing: rejoin at
		// once; anything else after a backoff.
		if !errors.Is(err, wire.ErrRebalanceInProgress) && !errors.Is(err, wire.ErrIllegalGeneration) {
			failures++
			if sleepCtx(g.ctx, backoff(g.c.cfg.RetryBackoffMin, g.c.cfg.RetryBackoffMax, failures)) != nil {
				return
			}
		}
	}
}

func (g *GroupConsumer) setGeneration(gen int32) {
	g.mu.Lock()
	g.generation = gen
	g.mu.Unlock()
}

// join joins with the current subscription; it parks until the
// group's rebalance completes.
func (g *GroupConsumer) join() (*wire.JoinGroupResponse, error) {
	g.mu.Lock()
	req := &wire.JoinGroupRequest{Group: g.cfg.Group, MemberID: g.memberID, InstanceID: g.cfg.InstanceID,
		ProtocolType: groupProtocolType, SessionTimeoutMs: uint32(g.cfg.SessionTimeout.Milliseconds()),
		RebalanceTimeoutMs: uint32(g.cfg.RebalanceTimeout.Milliseconds())}
	sub := appendSubscription(nil, g.topics)
	g.mu.Unlock()
	for _, a := range g.cfg.Assignors {
		req.Protocols = append(req.Protocols, wire.GroupProtocol{Name: a, Metadata: sub})
	}
	var resp wire.JoinGroupResponse
	if err := g.c.groupCall(g.ctx, g.cfg.Group, req, &resp); err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.memberID = resp.MemberID
	g.mu.Unlock()
	return &resp, nil
}

// sync sends the leader's assignment (when this member leads) and
// returns this member's partitions.
func (g *GroupConsumer) sync(res *wire.JoinGroupResponse) ([]wire.TopicPartition, error) {
	req := &wire.SyncGroupRequest{Group: g.cfg.Group, MemberID: res.MemberID, Generation: res.Generation}
	if res.LeaderID == res.MemberID {
		plan, err := g.plan(res)
		if err != nil {
			return nil, err
		}
		for _, m := range res.Members {
			req.Assignments = append(req.Assignments, wire.GroupAssignment{MemberID: m.MemberID, Assignment: appendAssignment(nil, plan[m.MemberID])})
		}
	}
	var resp wire.SyncGroupResponse
	if err := g.c.groupCall(g.ctx, g.cfg.Group, req, &resp); err != nil {
		return nil, err
	}
	return decodeAssignment(resp.Assignment)
}

// plan is the leader's assignment: every member's subscription from its
// metadata, every subscribed topic's partition count from the cluster
// metadata (a topic that does not exist is not assigned).
func (g *GroupConsumer) plan(res *wire.JoinGroupResponse) (map[string][]wire.TopicPartition, error) {
	subs := make(map[string][]string, len(res.Members))
	parts := map[string]int32{}
	for _, m := range res.Members {
		topics, err := decodeSubscription(m.Metadata)
		if err != nil {
			topics = nil // a member whose metadata does not parse gets nothing
		}
		subs[m.MemberID] = topics
		for _, t := range topics {
			if _, ok := parts[t]; ok {
				continue
			}
			ctx, cancel := context.WithTimeout(g.ctx, g.cfg.RebalanceTimeout/2)
			n, err := g.c.Partitions(ctx, t)
			cancel()
			if err == nil {
				parts[t] = n
			}
		}
	}
	return assign(res.Protocol, subs, parts)
}

// apply starts fetching the assigned partitions from the group's
// committed offsets (else GroupConfig.Start) and tells OnAssigned.
func (g *GroupConsumer) apply(res *wire.JoinGroupResponse, parts []wire.TopicPartition) error {
	committed := map[wire.TopicPartition]wire.CommittedOffset{}
	if len(parts) > 0 {
		ctx, cancel := context.WithTimeout(g.ctx, g.cfg.SessionTimeout)
		offs, err := g.c.FetchGroupOffsets(ctx, g.cfg.Group, parts)
		cancel()
		if err != nil {
			return err
		}
		for _, o := range offs {
			committed[wire.TopicPartition{Topic: o.Topic, Partition: o.Partition}] = o
		}
	}
	g.mu.Lock()
	g.generation, g.owned = res.Generation, parts
	g.lastAuto = time.Now()
	g.mu.Unlock()
	for _, p := range parts {
		start := g.cfg.Start
		if o, ok := committed[p]; ok && o.Offset >= 0 && o.ErrorCode == wire.CodeNone {
			if _, id, known := g.c.meta.partitions(p.Topic); !known || o.TopicID.IsZero() || o.TopicID == id {
				start = StartAt(o.Offset)
			}
		}
		ctx, cancel := context.WithTimeout(g.ctx, g.cfg.SessionTimeout)
		err := g.cs.Assign(ctx, p.Topic, []int32{p.Partition}, start)
		cancel()
		if err != nil {
			return err
		}
	}
	if g.cfg.OnAssigned != nil {
		g.cfg.OnAssigned(g.ctx, append([]wire.TopicPartition(nil), parts...))
	}
	return nil
}

// heartbeat keeps the member's session until the generation ends for
// it, and says why it ended.
func (g *GroupConsumer) heartbeat() leaveReason {
	select {
	case <-g.fenced: // a refusal of the previous generation's commit
	default:
	}
	t := time.NewTicker(g.cfg.HeartbeatInterval)
	defer t.Stop()
	lastOK := time.Now()
	for {
		select {
		case <-g.ctx.Done():
			return reasonClosed
		case <-g.rejoin:
			return reasonRebalance
		case err := <-g.fenced:
			if !errors.Is(err, wire.ErrIllegalGeneration) {
				g.mu.Lock()
				g.memberID = ""
				g.mu.Unlock()
			}
			return reasonFenced
		case <-t.C:
		}
		memberID, gen := g.Member()
		ctx, cancel := context.WithTimeout(g.ctx, g.cfg.SessionTimeout)
		err := g.c.groupCall(ctx, g.cfg.Group, &wire.HeartbeatRequest{Group: g.cfg.Group, MemberID: memberID, Generation: gen},
			&wire.HeartbeatResponse{})
		cancel()
		switch {
		case err == nil:
			lastOK = time.Now()
		case errors.Is(err, ErrClosed) || g.ctx.Err() != nil:
			return reasonClosed
		case errors.Is(err, wire.ErrRebalanceInProgress):
			return reasonRebalance
		case errors.Is(err, wire.ErrUnknownMember), errors.Is(err, wire.ErrFencedInstance):
			g.mu.Lock()
			g.memberID = ""
			g.mu.Unlock()
			return reasonFenced
		case errors.Is(err, wire.ErrIllegalGeneration):
			return reasonFenced
		case time.Since(lastOK) > g.cfg.SessionTimeout:
			// No heartbeat reached the coordinator within the session:
			// the group has moved on without this member.
			return reasonFenced
		}
	}
}

// revokeAll hands the owned partitions back through Poll (which commits
// them when commit, with automatic commits), or drops them itself when
// no Poll takes them within the rebalance timeout, or at close.
func (g *GroupConsumer) revokeAll(commit bool) {
	g.mu.Lock()
	parts := append([]wire.TopicPartition(nil), g.owned...)
	g.mu.Unlock()
	if len(parts) == 0 {
		return
	}
	sort.Slice(parts, func(i, j int) bool {
		return parts[i].Topic < parts[j].Topic || parts[i].Topic == parts[j].Topic && parts[i].Partition < parts[j].Partition
	})
	rv := &revocation{parts: parts, commit: commit, done: make(chan struct{})}
	timer := time.NewTimer(g.cfg.RebalanceTimeout)
	defer timer.Stop()
	select {
	case g.revoke <- rv:
		<-rv.done
		return
	case <-timer.C:
	case <-g.ctx.Done():
		// Close commits and leaves with the partitions still owned.
		return
	}
	g.unassign(parts)
}
