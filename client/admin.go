package client

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/corestream/corestream/netio/wire"
)

// TopicSpec describes a topic to create.
type TopicSpec struct {
	// Name follows Kafka's rule: 1..249 bytes of [a-zA-Z0-9._-].
	Name string
	// Partitions is the partition count, 1..16384.
	Partitions int32
	// ReplicationFactor is the number of copies; 0 means the cluster's
	// default (cluster.default_replication_factor, "all" nodes by default).
	ReplicationFactor int16
	// Configs are topic configuration overrides.
	Configs map[string]string
	// ValidateOnly checks everything and creates nothing.
	ValidateOnly bool
}

// CreateTopic creates a topic on the metadata primary and refreshes the
// metadata cache. Errors: TOPIC_ALREADY_EXISTS, INVALID_TOPIC_NAME,
// INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, INVALID_CONFIG (as
// *wire.ErrorResponse), or an unknown outcome when the connection broke
// after sending.
func (c *Client) CreateTopic(ctx context.Context, spec TopicSpec) (wire.CreateTopicResponse, error) {
	req := wire.CreateTopicRequest{Name: spec.Name, Partitions: spec.Partitions, ReplicationFactor: spec.ReplicationFactor,
		TimeoutMs: timeoutMs(c.cfg.RequestTimeout), ValidateOnly: spec.ValidateOnly}
	for k, v := range spec.Configs {
		req.Configs = append(req.Configs, wire.Config{Key: k, Value: v})
	}
	sort.Slice(req.Configs, func(i, j int) bool { return req.Configs[i].Key < req.Configs[j].Key })
	if err := req.Validate(); err != nil {
		return wire.CreateTopicResponse{}, err
	}
	var resp wire.CreateTopicResponse
	if err := c.doAdmin(ctx, metadataPrimary, &req, &resp, false); err != nil {
		return resp, err
	}
	if !spec.ValidateOnly {
		c.refreshMetadata(ctx)
	}
	return resp, nil
}

// DeleteTopic deletes a topic on the metadata primary and returns the id
// of the topic deleted. A missing topic is UNKNOWN_TOPIC_OR_PARTITION.
func (c *Client) DeleteTopic(ctx context.Context, name string) (wire.TopicID, error) {
	req := wire.DeleteTopicRequest{Name: name, TimeoutMs: timeoutMs(c.cfg.RequestTimeout)}
	var resp wire.DeleteTopicResponse
	if err := c.doAdmin(ctx, metadataPrimary, &req, &resp, false); err != nil {
		return wire.TopicID{}, err
	}
	c.refreshMetadata(ctx)
	return resp.TopicID, nil
}

// AddPartitions raises a topic's partition count to total and returns the
// count now. The request carries the total, so it is retried safely.
func (c *Client) AddPartitions(ctx context.Context, name string, total int32) (int32, error) {
	req := wire.AddPartitionsRequest{Name: name, Partitions: total, TimeoutMs: timeoutMs(c.cfg.RequestTimeout)}
	if err := req.Validate(); err != nil {
		return 0, err
	}
	var resp wire.AddPartitionsResponse
	if err := c.doAdmin(ctx, metadataPrimary, &req, &resp, false); err != nil {
		return 0, err
	}
	c.refreshMetadata(ctx)
	return resp.Partitions, nil
}

// ListTopics returns every topic, sorted by name.
func (c *Client) ListTopics(ctx context.Context) ([]wire.TopicSummary, error) {
	var resp wire.ListTopicsResponse
	if err := c.doAdmin(ctx, anyNode, &wire.ListTopicsRequest{}, &resp, true); err != nil {
		return nil, err
	}
	return resp.Topics, nil
}

// DescribeTopic returns one topic's routes and configuration. A missing
// topic is UNKNOWN_TOPIC_OR_PARTITION.
func (c *Client) DescribeTopic(ctx context.Context, name string) (*wire.DescribeTopicResponse, error) {
	var resp wire.DescribeTopicResponse
	if err := c.doAdmin(ctx, anyNode, &wire.DescribeTopicRequest{Name: name}, &resp, true); err != nil {
		return nil, err
	}
	return &resp, nil
}

// Metadata fetches fresh metadata (nodes, metadata primary, every topic's
// routes), also refreshing the client's cache. It is the answer of a node
// that sees the metadata quorum when one answers, as for every refresh
// (docs/client.md, "Routing and metadata"); else the best other one.
func (c *Client) Metadata(ctx context.Context) (*wire.MetadataResponse, error) {
	if c.isClosed() {
		return nil, ErrClosed
	}
	return c.fetchMetadata(ctx)
}

// ClusterStatus returns the nodes with their primary, replica and
// preferred-primary counts, and the cluster's partition health.
func (c *Client) ClusterStatus(ctx context.Context) (*wire.ClusterStatusResponse, error) {
	var resp wire.ClusterStatusResponse
	if err := c.doAdmin(ctx, anyNode, &wire.ClusterStatusRequest{}, &resp, true); err != nil {
		return nil, err
	}
	return &resp, nil
}

// DescribePartition asks the partition's primary for its route, offsets and
// replica progress.
func (c *Client) DescribePartition(ctx context.Context, topic string, partition int32) (*wire.DescribePartitionResponse, error) {
	var req wire.DescribePartitionRequest
	var resp wire.DescribePartitionResponse
	build := func(ref wire.PartitionRef) wire.Request { req.PartitionRef = ref; return &req }
	if err := c.doPartition(ctx, topic, partition, build, &resp, partitionOpts{}); err != nil {
		return nil, err
	}
	return &resp, nil
}

// MovePrimary moves one partition's primary to node to (one of its in-sync
// replicas) and waits for the move. Errors: NOT_REPLICA,
// NOT_IN_SYNC_REPLICA, NODE_NOT_AVAILABLE, REBALANCE_IN_PROGRESS.
func (c *Client) MovePrimary(ctx context.Context, topic string, partition, to int32) (wire.MovePrimaryResponse, error) {
	req := wire.MovePrimaryRequest{Topic: topic, Partition: partition, TargetNodeID: to, TimeoutMs: timeoutMs(c.cfg.RequestTimeout)}
	if t := c.meta.topic(topic); t != nil {
		req.TopicID = t.id
	}
	var resp wire.MovePrimaryResponse
	if err := c.doAdmin(ctx, metadataPrimary, &req, &resp, true); err != nil {
		return resp, err
	}
	c.kickRefresh()
	return resp, nil
}

// Rebalance asks the metadata primary for the primary moves that would
// even out primaries per node (at most movesMax, 0 = no limit) and, unless
// dryRun, to start them (one at a time, in the background).
func (c *Client) Rebalance(ctx context.Context, dryRun bool, movesMax uint32) (*wire.RebalanceResponse, error) {
	return c.RebalanceRequest(ctx, &wire.RebalanceRequest{DryRun: dryRun, MovesMax: movesMax})
}

// RebalanceRequest is Rebalance with every field of the request, such as
// Preferred (only moves back to preferred primaries; a server that does
// not speak Rebalance v1 ignores it and plans as Rebalance does).
func (c *Client) RebalanceRequest(ctx context.Context, req *wire.RebalanceRequest) (*wire.RebalanceResponse, error) {
	dryRun := req.DryRun
	var resp wire.RebalanceResponse
	if err := c.doAdmin(ctx, metadataPrimary, req, &resp, dryRun); err != nil {
		return nil, err
	}
	if resp.Started {
		c.kickRefresh()
	}
	return &resp, nil
}

// ListOffsets returns a partition's offset for timestamp: wire.TimestampEarliest
// (the log start offset), wire.TimestampLatest (the high watermark), or a time
// in milliseconds (the first offset of the first batch whose max timestamp
// is at or after it, or -1).
func (c *Client) ListOffsets(ctx context.Context, topic string, partition int32, timestamp int64) (wire.ListOffsetsResponse, error) {
	req := wire.ListOffsetsRequest{Timestamp: timestamp}
	var resp wire.ListOffsetsResponse
	build := func(ref wire.PartitionRef) wire.Request { req.PartitionRef = ref; return &req }
	err := c.doPartition(ctx, topic, partition, build, &resp, partitionOpts{})
	return resp, err
}

// CommitOffsets stores offsets for the named consumer on its coordinator.
// Each offset is the next one the consumer will read. Entries that fail
// are reported together as *PartitionError values joined with errors.Join.
func (c *Client) CommitOffsets(ctx context.Context, consumer string, offsets []wire.OffsetCommit) error {
	req := wire.CommitOffsetsRequest{Consumer: consumer, Offsets: offsets}
	if err := req.Validate(); err != nil {
		return err
	}
	var resp wire.CommitOffsetsResponse
	if err := c.doAdmin(ctx, coordinator, &req, &resp, true); err != nil {
		return err
	}
	var errs []error
	for _, r := range resp.Results {
		if r.ErrorCode != wire.CodeNone {
			errs = append(errs, &PartitionError{Topic: r.Topic, Partition: r.Partition, Err: wire.ErrorForCode(r.ErrorCode)})
		}
	}
	return errors.Join(errs...)
}

// FetchOffsets reads the named consumer's committed offsets for the given
// partitions (none: every partition it committed). A partition with
// nothing committed has offset -1.
func (c *Client) FetchOffsets(ctx context.Context, consumer string, partitions []wire.TopicPartition) ([]wire.CommittedOffset, error) {
	req := wire.FetchOffsetsRequest{Consumer: consumer, Partitions: partitions}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	var resp wire.FetchOffsetsResponse
	if err := c.doAdmin(ctx, coordinator, &req, &resp, true); err != nil {
		return nil, err
	}
	return resp.Offsets, nil
}

// Partitions returns the partition count of topic from the metadata cache,
// refreshing it when the topic is not cached: once when a trusted answer
// (docs/client.md, "Routing and metadata") confirms that the topic does
// not exist, at most UnknownTopicRetriesMax times while answers are
// untrusted.
func (c *Client) Partitions(ctx context.Context, topic string) (int32, error) {
	n, _, err := c.topicPartitions(ctx, topic)
	return n, err
}

// topicPartitions returns topic's partition count and id, refreshing the
// metadata as Partitions says.
func (c *Client) topicPartitions(ctx context.Context, topic string) (int32, wire.TopicID, error) {
	n, id, ok := c.meta.partitions(topic)
	for try := 0; !ok && try < c.cfg.UnknownTopicRetriesMax; try++ {
		if try > 0 {
			if err := sleepCtx(ctx, backoff(c.cfg.RetryBackoffMin, c.cfg.RetryBackoffMax, try)); err != nil {
				return 0, id, err
			}
		}
		if err := c.refreshAfterError(ctx, time.Now()); err != nil && ctx.Err() != nil {
			return 0, id, ctx.Err()
		}
		if n, id, ok = c.meta.partitions(topic); !ok && c.meta.confirmsAbsent(topic, 0) {
			return 0, id, errNoSuchTopic(topic)
		}
	}
	if !ok || n == 0 {
		return 0, id, wire.Errorf(wire.ErrUnknownTopicOrPartition,
			"topic %q is not in the cluster metadata, and no node that sees the metadata quorum answered", topic)
	}
	return n, id, nil
}
