package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/corestream/corestream/netio/wire"
)

// This file holds the routing and retry rules of docs/protocol.md
// ("What a client does"), shared by every request kind.

// verdict is what to do after a failed attempt.
type verdict int

const (
	// giveUp: the error is final for this request.
	giveUp verdict = iota
	// resendNow: the route changed (a hint was applied); resend at once,
	// or after the backoff when an earlier attempt already followed one.
	resendNow
	// refreshThenResend: refresh the metadata, back off, resend.
	refreshThenResend
	// backoffThenResend: back off (at least retry_after_ms), resend.
	backoffThenResend
)

// judge classifies err, the outcome of one attempt at a data request for
// topic/partition, and applies what it teaches to the metadata cache (a
// hint). retryAfter is the broker's advice, 0 when none. Every error that
// may mean the route is wrong — from the broker or from the cached
// metadata — refreshes the metadata (paced: refreshAfterError): a route
// is never left to fail until the periodic refresh.
func (c *Client) judge(topic string, partition int32, err error) (v verdict, retryAfter time.Duration) {
	switch {
	case err == nil:
		return giveUp, 0
	case errors.Is(err, ErrClosed), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, ErrUnsupported), errors.Is(err, ErrTopicRecreated):
		return giveUp, 0
	case errors.Is(err, ErrConnectionLost), errors.Is(err, ErrUnreachable):
		return refreshThenResend, 0
	}
	var er *wire.ErrorResponse
	if !errors.As(err, &er) {
		return giveUp, 0
	}
	retryAfter = time.Duration(er.RetryAfterMs) * time.Millisecond
	switch {
	case errors.Is(er, wire.ErrNotPrimary), errors.Is(er, wire.ErrStaleGeneration):
		if c.meta.applyHint(topic, partition, er.Hint) {
			c.kickRefresh()
			return resendNow, 0
		}
		return refreshThenResend, retryAfter
	case errors.Is(er, wire.ErrBusy), errors.Is(er, wire.ErrCorruptMessage):
		// The route is right: the node is loaded, or the bytes were hurt
		// on the way.
		return backoffThenResend, retryAfter
	case wire.IsRetriable(er):
		// UNKNOWN_TOPIC_OR_PARTITION, PRIMARY_NOT_AVAILABLE,
		// NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, STORAGE_ERROR...: the
		// primary may have moved, or the cached route came from a node
		// that could not see it.
		return refreshThenResend, retryAfter
	}
	return giveUp, 0
}

// partitionOpts are the knobs of one data request.
type partitionOpts struct {
	// ownFrame: the response keeps slices into its frame (fetch).
	ownFrame bool
	// topicID, when not zero, pins the topic's history: if the metadata
	// now shows another id the request fails with ErrTopicRecreated.
	topicID wire.TopicID
}

// doPartition sends the data request that build makes for a route to
// topic/partition's primary and decodes the answer into resp, following
// the routing rules: a first hint is followed at once (later ones after
// the backoff), routing errors and lost
// connections refresh the metadata, other retriable errors back off; at
// most RetryAttemptsMax attempts, all under ctx.
func (c *Client) doPartition(ctx context.Context, topic string, partition int32,
	build func(wire.PartitionRef) wire.Request, resp wire.Response, o partitionOpts) error {
	var lastErr error
	unknown := 0
	for attempt := 0; attempt < c.cfg.RetryAttemptsMax; attempt++ {
		sentAt := time.Now()
		err := c.attemptPartition(ctx, topic, partition, build, resp, o)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		lastErr = err
		v, after := c.judge(topic, partition, err)
		if errors.Is(err, wire.ErrUnknownTopicOrPartition) {
			if c.meta.confirmsAbsent(topic, partition) {
				return err // a trusted answer, refreshed after the failure, lacks it
			}
			if unknown++; unknown > c.cfg.UnknownTopicRetriesMax {
				return err
			}
		}
		if err := c.afterVerdict(ctx, v, after, attempt, sentAt); err != nil {
			if err == errGiveUp {
				return lastErr
			}
			return err
		}
	}
	return fmt.Errorf("%w: %s/%d after %d attempts: %w", ErrRetriesExhausted, topic, partition, c.cfg.RetryAttemptsMax, lastErr)
}

// errGiveUp tells doPartition that the verdict was giveUp.
var errGiveUp = errors.New("give up")

// afterVerdict carries out v before the next attempt: a metadata refresh
// (one that started after sentAt, when the failed attempt was made) and a
// backoff, under ctx.
func (c *Client) afterVerdict(ctx context.Context, v verdict, retryAfter time.Duration, attempt int, sentAt time.Time) error {
	switch v {
	case giveUp:
		return errGiveUp
	case resendNow:
		if attempt == 0 {
			return nil
		}
		// Hints that keep changing the route (a primary moving while the
		// nodes' routes converge) are followed after the usual backoff, so
		// that the attempts span the move instead of a few milliseconds.
	case refreshThenResend:
		if err := c.refreshAfterError(ctx, sentAt); err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return sleepCtx(ctx, max(retryAfter, backoff(c.cfg.RetryBackoffMin, c.cfg.RetryBackoffMax, attempt)))
}

// attemptPartition makes one attempt: resolve the route (refreshing the
// metadata once when the partition is not cached), connect, round trip.
func (c *Client) attemptPartition(ctx context.Context, topic string, partition int32,
	build func(wire.PartitionRef) wire.Request, resp wire.Response, o partitionOpts) error {
	rt, err := c.routeOf(ctx, topic, partition)
	if err != nil {
		return err
	}
	if !o.topicID.IsZero() && rt.ref.TopicID != o.topicID {
		return fmt.Errorf("%w: %s now has id %s, not %s", ErrTopicRecreated, topic, rt.ref.TopicID, o.topicID)
	}
	cn, err := c.connForPartition(ctx, rt.addr, &rt.ref)
	if err != nil {
		return err
	}
	return cn.roundTrip(ctx, build(rt.ref), resp, o.ownFrame)
}

// routeOf looks topic/partition up, refreshing the metadata once if the
// topic is not cached. When a trusted answer confirms that the topic does
// not exist, the error says so.
func (c *Client) routeOf(ctx context.Context, topic string, partition int32) (route, error) {
	rt, err := c.meta.lookup(topic, partition)
	if err != nil && c.meta.topic(topic) == nil {
		if rerr := c.refreshAfterError(ctx, time.Now()); rerr != nil {
			return route{}, rerr
		}
		rt, err = c.meta.lookup(topic, partition)
		if err != nil && c.meta.topic(topic) == nil && c.meta.confirmsAbsent(topic, partition) {
			err = errNoSuchTopic(topic)
		}
	}
	return rt, err
}

// errNoSuchTopic is the error for a topic that a trusted metadata answer
// does not list.
func errNoSuchTopic(topic string) error {
	return wire.Errorf(wire.ErrUnknownTopicOrPartition,
		"topic %q does not exist: the cluster metadata (from a node that sees the metadata quorum) does not list it", topic)
}

// adminTarget says which node an admin request must reach.
type adminTarget int

const (
	// anyNode: read-only requests (Metadata, ListTopics, ClusterStatus...).
	anyNode adminTarget = iota
	// metadataPrimary: requests that change metadata.
	metadataPrimary
	// coordinator: a named consumer's offsets; the metadata primary in this
	// version, but NOT_COORDINATOR hints are followed.
	coordinator
)

// doAdmin sends an admin request to its target, following
// NOT_METADATA_PRIMARY and NOT_COORDINATOR hints and retrying retriable
// errors. A request that is not idempotent is not resent once it may have
// reached a broker (a lost connection, REQUEST_TIMED_OUT): its outcome is
// unknown and the error says so.
func (c *Client) doAdmin(ctx context.Context, target adminTarget, req wire.Request, resp wire.Response, idempotent bool) error {
	var lastErr error
	hint := ""
	unknown := false
	for attempt := 0; attempt < c.cfg.RetryAttemptsMax; attempt++ {
		sentAt := time.Now()
		addr, err := c.adminAddr(ctx, target, hint, attempt)
		hint = ""
		sent := false
		if err == nil {
			var cn *conn
			if cn, err = c.connTo(ctx, addr); err == nil {
				sent = true
				if err = cn.roundTrip(ctx, req, resp, false); err == nil {
					return nil
				}
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		lastErr = err
		var er *wire.ErrorResponse
		isER := errors.As(err, &er)
		switch {
		case errors.Is(err, ErrClosed), errors.Is(err, ErrUnsupported):
			return err
		case errors.Is(err, ErrUnreachable):
			c.refreshAfterError(ctx, sentAt)
		case errors.Is(err, ErrConnectionLost) || (isER && errors.Is(er, wire.ErrRequestTimedOut)):
			if sent && !idempotent {
				return fmt.Errorf("%s: outcome unknown (the request may have been applied): %w", req.APIKey(), err)
			}
			c.refreshAfterError(ctx, sentAt)
		case isER && errors.Is(er, wire.ErrUnknownTopicOrPartition):
			// The metadata primary's answer is final; another node's is
			// checked once with the metadata primary (it may lag).
			_, mp := c.meta.metadataPrimaryAddr()
			if unknown || target != anyNode || mp == "" || mp == addr {
				return err
			}
			unknown, hint = true, mp
			continue
		case isER && (errors.Is(er, wire.ErrNotMetadataPrimary) || errors.Is(er, wire.ErrNotCoordinator)):
			if er.Hint != nil && er.Hint.Address != "" {
				hint = er.Hint.Address
				continue
			}
			c.refreshAfterError(ctx, sentAt)
		case isER && wire.IsRetriable(er):
		default:
			return err
		}
		after := time.Duration(0)
		if isER {
			after = time.Duration(er.RetryAfterMs) * time.Millisecond
		}
		if err := sleepCtx(ctx, max(after, backoff(c.cfg.RetryBackoffMin, c.cfg.RetryBackoffMax, attempt))); err != nil {
			return err
		}
	}
	return fmt.Errorf("%w: %s after %d attempts: %w", ErrRetriesExhausted, req.APIKey(), c.cfg.RetryAttemptsMax, lastErr)
}

// adminAddr picks the address for an admin attempt: the hinted one, the
// metadata primary, or (for anyNode) a known address, rotating by attempt.
func (c *Client) adminAddr(ctx context.Context, target adminTarget, hint string, attempt int) (string, error) {
	if hint != "" {
		return hint, nil
	}
	if target == anyNode {
		c.mu.Lock()
		addrs := []string{c.lastGood}
		c.mu.Unlock()
		addrs = append(addrs, c.meta.addrs()...)
		addrs = append(addrs, c.cfg.Brokers...)
		if addrs[0] == "" {
			addrs = addrs[1:]
		}
		return addrs[attempt%len(addrs)], nil
	}
	if _, addr := c.meta.metadataPrimaryAddr(); addr != "" {
		return addr, nil
	}
	if err := c.refreshMetadata(ctx); err != nil {
		return "", err
	}
	if _, addr := c.meta.metadataPrimaryAddr(); addr != "" {
		return addr, nil
	}
	return "", wire.Errorf(wire.ErrNotMetadataPrimary, "the cluster metadata names no metadata primary (no quorum?)")
}
