package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/corestream/corestream/netio/wire"
)

// GroupConsumer consumes as a member of a consumer group: the group's
// members share the partitions of the topics they subscribe to, and
// when a member joins, leaves or stops heartbeating the partitions move
// (Kafka's classic group protocol, eager: every member hands back its
// partitions at a rebalance). The leader member computes the assignment
// (GroupConfig.Assignors); a partition starts at the group's committed
// offset, or at GroupConfig.Start when there is none.
//
// A rebalance waits for Poll: the member hands back its partitions in
// the Poll after the one whose records were being processed (committing
// first with automatic commits, and calling OnRevoked), so no record of
// a partition is handed to the next owner while this member is still
// processing it. An application that does not call Poll within
// GroupConfig.RebalanceTimeout loses its partitions without a commit.
//
// Poll, Commit, CommitAsync and Close may be called from any goroutine;
// records come to one Poll at a time.
type GroupConsumer struct {
	c   *Client
	cfg GroupConfig
	cs  *Consumer

	// ctx lives until Close; the member goroutine runs under it.
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	// revoke hands a revocation from the member goroutine to Poll.
	revoke chan *revocation
	// rejoin asks the member goroutine to rejoin (the subscription
	// changed); capacity 1.
	rejoin chan struct{}
	// fenced tells the member goroutine that a commit was refused
	// because the group moved on without this member, so it rejoins
	// without waiting for its next heartbeat; capacity 1.
	fenced chan error

	mu sync.Mutex
	// topics is the subscription; started says the member goroutine
	// runs. Guarded by mu.
	topics  []string
	started bool
	closed  bool
	// memberID, generation and owned are the member's current
	// membership ("", -1, none between generations). Guarded by mu.
	memberID   string
	generation int32
	owned      []wire.TopicPartition
	// lastAuto is when the last automatic commit started. Guarded by mu.
	lastAuto time.Time
}

// revocation is a rebalance's request that Poll hand back parts.
type revocation struct {
	parts []wire.TopicPartition
	// commit says the positions may still be committed (the member is
	// still in its generation).
	commit bool
	done   chan struct{}
}

// ErrNotMember is returned by Commit when the member owns no partitions
// in a generation (before its first assignment, or between two).
var ErrNotMember = errors.New("client: not a member of a group generation")

// NewGroupConsumer returns a group consumer on c; it joins the group at
// Subscribe.
func (c *Client) NewGroupConsumer(cfg GroupConfig) (*GroupConsumer, error) {
	cfg, err := cfg.withDefaults(&c.cfg)
	if err != nil {
		return nil, err
	}
	cs, err := c.NewConsumer(cfg.Consumer)
	if err != nil {
		return nil, err
	}
	g := &GroupConsumer{c: c, cfg: cfg, cs: cs, done: make(chan struct{}), revoke: make(chan *revocation),
		rejoin: make(chan struct{}, 1), fenced: make(chan error, 1), generation: -1}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	return g, nil
}

// Subscribe sets the topics the member consumes (replacing the previous
// subscription) and joins the group, or rejoins it with the new
// subscription. It returns at once; partitions come with the first
// rebalance (OnAssigned).
func (g *GroupConsumer) Subscribe(topics ...string) error {
	for _, t := range topics {
		if err := wire.ValidateTopicName(t); err != nil {
			return err
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return ErrClosed
	}
	g.topics = append([]string(nil), topics...)
	if !g.started {
		g.started = true
		go g.run()
		return nil
	}
	select {
	case g.rejoin <- struct{}{}:
	default:
	}
	return nil
}

// Assigned is the partitions the member owns now, sorted.
func (g *GroupConsumer) Assigned() []wire.TopicPartition {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]wire.TopicPartition(nil), g.owned...)
}

// Member is the member's id and generation ("" and -1 between
// generations).
func (g *GroupConsumer) Member() (memberID string, generation int32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.memberID, g.generation
}

// Poll returns the records ready, waiting under ctx until there are
// some, as Consumer.Poll does; it also hands partitions back at a
// rebalance and makes the automatic commits.
func (g *GroupConsumer) Poll(ctx context.Context) ([]Record, error) {
	return g.PollRecords(ctx, 0)
}

// PollRecords is Poll returning at most recordsMax records (0: the
// consumer's PollRecordsMax): a caller that wants N records in all asks
// for the rest each time, so the positions committed, which move past
// the records returned only, never pass a record it did not take.
func (g *GroupConsumer) PollRecords(ctx context.Context, recordsMax int) ([]Record, error) {
	if recordsMax <= 0 || recordsMax > g.cs.cfg.PollRecordsMax {
		recordsMax = g.cs.cfg.PollRecordsMax
	}
	g.mu.Lock()
	closed := g.closed
	auto := g.cfg.AutoCommitInterval > 0 && len(g.owned) > 0 && time.Since(g.lastAuto) >= g.cfg.AutoCommitInterval
	if auto {
		g.lastAuto = time.Now()
	}
	g.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	if auto {
		g.CommitAsync(nil)
	}
	for {
		select {
		case rv := <-g.revoke:
			g.handBack(ctx, rv)
		default:
		}
		if recs, err, ok := g.cs.take(recordsMax); ok {
			return recs, err
		}
		select {
		case <-g.cs.notify:
		case rv := <-g.revoke:
			g.handBack(ctx, rv)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// handBack gives up a revocation's partitions on Poll's goroutine:
// commit (automatic commits), OnRevoked, then stop fetching them.
func (g *GroupConsumer) handBack(ctx context.Context, rv *revocation) {
	defer close(rv.done)
	if rv.commit && g.cfg.AutoCommitInterval > 0 {
		cctx, cancel := context.WithTimeout(ctx, g.cfg.RebalanceTimeout)
		_ = g.Commit(cctx) // refused or failed: the next owner starts from the last commit
		cancel()
	}
	if g.cfg.OnRevoked != nil {
		g.cfg.OnRevoked(ctx, rv.parts)
	}
	g.unassign(rv.parts)
}

func (g *GroupConsumer) unassign(parts []wire.TopicPartition) {
	for _, p := range parts {
		g.cs.Unassign(p.Topic, p.Partition)
	}
	g.mu.Lock()
	g.owned = nil
	g.mu.Unlock()
}

// offsets are the positions of the owned partitions: the next offset
// Poll returns for each.
func (g *GroupConsumer) offsets() (memberID string, generation int32, offs []wire.OffsetCommit) {
	g.mu.Lock()
	memberID, generation = g.memberID, g.generation
	owned := g.owned
	g.mu.Unlock()
	g.cs.mu.Lock()
	defer g.cs.mu.Unlock()
	for _, p := range owned {
		if f := g.cs.fetchers[partKey{p.Topic, p.Partition}]; f != nil {
			offs = append(offs, wire.OffsetCommit{Topic: p.Topic, TopicID: f.topicID, Partition: p.Partition, Offset: f.position})
		}
	}
	return memberID, generation, offs
}

// Commit commits the positions of the owned partitions (after the
// records Poll returned) under the member's generation, and waits for
// the answer. wire.ErrIllegalGeneration, wire.ErrUnknownMember or
// wire.ErrRebalanceInProgress say the group moved on: the partitions
// are someone else's now, or will be at the next rebalance.
func (g *GroupConsumer) Commit(ctx context.Context) error {
	memberID, gen, offs := g.offsets()
	if gen < 0 || memberID == "" {
		return ErrNotMember
	}
	if len(offs) == 0 {
		return nil
	}
	return g.checkFenced(g.c.CommitGroupOffsets(ctx, g.cfg.Group, memberID, gen, offs))
}

// checkFenced passes err on, and when it says the group moved on without
// this member, tells the member goroutine: it rejoins at once instead of
// at its next heartbeat, so fewer records are processed under a
// membership whose commits are refused.
func (g *GroupConsumer) checkFenced(err error) error {
	if errors.Is(err, wire.ErrUnknownMember) || errors.Is(err, wire.ErrIllegalGeneration) || errors.Is(err, wire.ErrFencedInstance) {
		select {
		case g.fenced <- err:
		default:
		}
	}
	return err
}

// CommitAsync commits as Commit does without waiting; done, when not
// nil, gets the outcome on another goroutine.
func (g *GroupConsumer) CommitAsync(done func(error)) {
	memberID, gen, offs := g.offsets()
	if gen < 0 || memberID == "" || len(offs) == 0 {
		if done != nil {
			go done(nil)
		}
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(g.ctx, g.c.cfg.RequestTimeout)
		defer cancel()
		err := g.checkFenced(g.c.CommitGroupOffsets(ctx, g.cfg.Group, memberID, gen, offs))
		if done != nil {
			done(err)
		}
	}()
}

// Close commits (automatic commits), leaves the group (a static member
// does not: its session keeps its place for a restart) and stops
// fetching. It does not close the Client.
func (g *GroupConsumer) Close() error {
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil
	}
	g.closed = true
	started := g.started
	g.mu.Unlock()
	g.cancel()
	if started {
		<-g.done
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.c.cfg.RequestTimeout)
	defer cancel()
	var err error
	if g.cfg.AutoCommitInterval > 0 {
		if cerr := g.Commit(ctx); cerr != nil && !errors.Is(cerr, ErrNotMember) {
			err = fmt.Errorf("client: group %q: commit at close: %w", g.cfg.Group, cerr)
		}
	}
	memberID, _ := g.Member()
	if memberID != "" && g.cfg.InstanceID == "" {
		var resp wire.LeaveGroupResponse
		if lerr := g.c.groupCall(ctx, g.cfg.Group, &wire.LeaveGroupRequest{Group: g.cfg.Group,
			Members: []wire.LeavingMember{{MemberID: memberID}}}, &resp); lerr != nil && err == nil {
			err = fmt.Errorf("client: group %q: leave: %w", g.cfg.Group, lerr)
		}
	}
	g.cs.Close()
	return err
}
