package client

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/corestream/corestream/netio/wire"
)

// The consumer group calls of the native protocol (docs/protocol.md,
// "Consumer groups"), for the group consumer (group.go) and operators.

// coordCache remembers where a group's coordinator is, so that group
// calls go straight there; a NOT_COORDINATOR hint or a failed connection
// replaces it.
type coordCache struct {
	mu   sync.Mutex
	addr map[string]string
}

func (cc *coordCache) get(group string) string {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.addr[group]
}

func (cc *coordCache) set(group, addr string) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.addr == nil {
		cc.addr = map[string]string{}
	}
	if addr == "" {
		delete(cc.addr, group)
		return
	}
	cc.addr[group] = addr
}

// FindCoordinator asks any node which node coordinates group.
func (c *Client) FindCoordinator(ctx context.Context, group string) (wire.FindCoordinatorResponse, error) {
	if err := wire.ValidateConsumerName(group); err != nil {
		return wire.FindCoordinatorResponse{}, err
	}
	var resp wire.FindCoordinatorResponse
	err := c.doAdmin(ctx, anyNode, &wire.FindCoordinatorRequest{Group: group}, &resp, true)
	return resp, err
}

// groupCall sends req to group's coordinator and decodes its answer into
// resp. It finds the coordinator (cached), follows NOT_COORDINATOR
// hints, and retries what a retry fixes (a lost connection, no
// coordinator yet, a coordinator still loading, a busy node), at most
// Config.RetryAttemptsMax attempts. The group's own answers
// (REBALANCE_IN_PROGRESS, UNKNOWN_MEMBER, ILLEGAL_GENERATION, …) come
// back at once: the caller acts on them. Every group request may be
// resent: a join or commit that arrives twice does what one does.
func (c *Client) groupCall(ctx context.Context, group string, req wire.Request, resp wire.Response) error {
	var lastErr error
	for attempt := 0; attempt < c.cfg.RetryAttemptsMax; attempt++ {
		if attempt > 0 {
			if err := sleepCtx(ctx, backoff(c.cfg.RetryBackoffMin, c.cfg.RetryBackoffMax, attempt)); err != nil {
				return err
			}
		}
		addr := c.coords.get(group)
		if addr == "" {
			co, err := c.FindCoordinator(ctx, group)
			if err != nil {
				if ctx.Err() != nil || !retriableGroupErr(err) {
					return err
				}
				lastErr = err
				continue
			}
			addr = co.Address
			c.coords.set(group, addr)
		}
		cn, err := c.connTo(ctx, addr)
		if err == nil {
			if err = cn.roundTrip(ctx, req, resp, false); err == nil {
				return nil
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		lastErr = err
		var er *wire.ErrorResponse
		switch {
		case errors.Is(err, ErrClosed), errors.Is(err, ErrUnsupported):
			return err
		case errors.As(err, &er) && errors.Is(er, wire.ErrNotCoordinator):
			hint := ""
			if er.Hint != nil {
				hint = er.Hint.Address
			}
			c.coords.set(group, hint)
		case retriableGroupErr(err):
			c.coords.set(group, "")
		default:
			return err
		}
	}
	return fmt.Errorf("%w: %s to group %q's coordinator: %w", ErrRetriesExhausted, req.APIKey(), group, lastErr)
}

// retriableGroupErr says whether a group call that failed with err may
// succeed when sent again (perhaps to another coordinator).
func retriableGroupErr(err error) bool {
	switch {
	case errors.Is(err, ErrConnectionLost), errors.Is(err, ErrUnreachable), errors.Is(err, ErrNoBrokers):
		return true
	case errors.Is(err, wire.ErrCoordinatorNotAvailable), errors.Is(err, wire.ErrCoordinatorLoading),
		errors.Is(err, wire.ErrBusy), errors.Is(err, wire.ErrMetadataNotReady), errors.Is(err, wire.ErrNotMetadataPrimary),
		errors.Is(err, wire.ErrNodeNotAvailable), errors.Is(err, wire.ErrRequestTimedOut), errors.Is(err, wire.ErrNotCoordinator):
		return true
	}
	return false
}

// ListGroups lists the consumer groups of the cluster: every node lists
// those it coordinates, and the answers are merged, sorted by name. A
// node that does not answer is left out of the listing and named in the
// error (with the groups of the others).
func (c *Client) ListGroups(ctx context.Context, states ...string) ([]wire.GroupSummary, error) {
	if _, err := c.Metadata(ctx); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []wire.GroupSummary
	var errs []error
	for _, addr := range c.meta.addrs() {
		var resp wire.ListGroupsResponse
		cn, err := c.connTo(ctx, addr)
		if err == nil {
			err = cn.roundTrip(ctx, &wire.ListGroupsRequest{States: states}, &resp, false)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("node at %s: %w", addr, err))
			continue
		}
		for _, g := range resp.Groups {
			if !seen[g.Name] {
				seen[g.Name] = true
				out = append(out, g)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, errors.Join(errs...)
}

// DescribeGroup is a group's state, members and their assignments (as
// their opaque bytes; GroupAssignment decodes a consumer's).
func (c *Client) DescribeGroup(ctx context.Context, group string) (*wire.DescribeGroupResponse, error) {
	var resp wire.DescribeGroupResponse
	if err := c.groupCall(ctx, group, &wire.DescribeGroupRequest{Group: group}, &resp); err != nil {
		return nil, err
	}
	return &resp, nil
}

// GroupAssignment decodes a consumer group member's assignment (Kafka's
// consumer protocol layout, which the SDK and Kafka clients write).
func GroupAssignment(b []byte) ([]wire.TopicPartition, error) { return decodeAssignment(b) }

// GroupSubscription decodes a consumer group member's subscribed topics.
func GroupSubscription(b []byte) ([]string, error) { return decodeSubscription(b) }

// DeleteGroup deletes an empty group with its committed offsets
// (wire.ErrNonEmptyGroup while it has members).
func (c *Client) DeleteGroup(ctx context.Context, group string) error {
	return c.groupCall(ctx, group, &wire.DeleteGroupRequest{Group: group}, &wire.DeleteGroupResponse{})
}

// DeleteGroupOffsets drops the group's committed offsets of partitions
// (Kafka's OffsetDelete); entries refused (a topic a member subscribes
// to) are joined *PartitionError values.
func (c *Client) DeleteGroupOffsets(ctx context.Context, group string, partitions []wire.TopicPartition) error {
	var resp wire.DeleteGroupOffsetsResponse
	if err := c.groupCall(ctx, group, &wire.DeleteGroupOffsetsRequest{Group: group, Partitions: partitions}, &resp); err != nil {
		return err
	}
	return partitionErrs(resp.Results)
}

// CommitGroupOffsets commits offsets for a group's member of generation
// (memberID "" and generation -1: an operator's commit, accepted only
// while the group has no members, as a reset is); entries refused are
// joined *PartitionError values.
func (c *Client) CommitGroupOffsets(ctx context.Context, group, memberID string, generation int32, offsets []wire.OffsetCommit) error {
	var resp wire.CommitGroupOffsetsResponse
	req := &wire.CommitGroupOffsetsRequest{Group: group, MemberID: memberID, Generation: generation, Offsets: offsets}
	if err := c.groupCall(ctx, group, req, &resp); err != nil {
		return err
	}
	return partitionErrs(resp.Results)
}

// FetchGroupOffsets reads the group's committed offsets of partitions
// (none: every one committed); -1 where nothing is.
func (c *Client) FetchGroupOffsets(ctx context.Context, group string, partitions []wire.TopicPartition) ([]wire.CommittedOffset, error) {
	var resp wire.FetchGroupOffsetsResponse
	if err := c.groupCall(ctx, group, &wire.FetchGroupOffsetsRequest{Group: group, Partitions: partitions}, &resp); err != nil {
		return nil, err
	}
	return resp.Offsets, nil
}

func partitionErrs(rs []wire.PartitionResult) error {
	var errs []error
	for _, r := range rs {
		if r.ErrorCode != wire.CodeNone {
			errs = append(errs, &PartitionError{Topic: r.Topic, Partition: r.Partition, Err: wire.ErrorForCode(r.ErrorCode)})
		}
	}
	return errors.Join(errs...)
}
