// Package nodesvc is a node's implementation of the typed service
// (cluster/service) that every front end calls: the native protocol, the
// HTTP API and the Kafka listener.
//
// It holds no pointer to the node. What it reads of the node's other
// parts comes in through Deps, wired once by the composition root
// (cluster/node): the published View and the route table, liveness, the
// shards and their replica hosts, the producer ids, the metadata
// controller's admin face (Admin) and the consumer-group coordinators
// (Coordinators). Every call answers in the service's error kinds.
package nodesvc

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/groups"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/routes"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"
)

// Service is this node's implementation of the typed service.
type Service struct {
	d Deps
	// followerReads counts fetches served by this node as a follower
	// (any goroutine; read by the metrics).
	followerReads atomic.Int64
}

var _ service.Service = (*Service)(nil)

// Deps are the service's ports: what it needs of the rest of the node.
// Every function may be called from any goroutine unless its doc says
// otherwise.
type Deps struct {
	Self raftlite.NodeID
	// ClusterID names the cluster in handshakes and Kafka metadata.
	ClusterID func() string
	// Version is the server's version, answered by Identity.
	Version string
	Storage config.Storage
	// CompactionDefaults are the compaction keys' defaults that a topic
	// without an override has (DescribeTopic).
	CompactionDefaults CompactionDefaults
	// DataDir is node.data_dir, the one log directory (LogDirs); New
	// makes it absolute, as Kafka names its log directories.
	DataDir string
	// Roster is the roster now (it changes at run time).
	Roster func() []config.RosterNode
	// AddrOf and KafkaAddrOf are a node's advertised client and Kafka
	// addresses ("" when the roster has none).
	AddrOf      func(id int32) string
	KafkaAddrOf func(id int32) string
	// Shards and Hosts are the shards and their replica hosts; Hosts[i]
	// is read only on shard i.
	Shards *shard.Group
	Hosts  []*partition.Host
	// ShardOf is the shard that owns partition p of topic id.
	ShardOf func(id [16]byte, p int32) int
	// View is the published metadata.
	View func() *routes.View
	// Routes is the route table.
	Routes RouteReader
	// Alive says whether a node is believed up.
	Alive func(id int32) bool
	// Ready is nil once the committed metadata is loaded.
	Ready func() error
	// MetaRoute is the metadata group's primary and term.
	MetaRoute func() (int32, int32)
	// Rebalancing says a balancer move is running; Stopping that the
	// node is stopping (no new long polls).
	Rebalancing func() bool
	Stopping    func() bool
	// OpenFailed is the error for a partition that could not be opened
	// here, nil when it did not fail.
	OpenFailed func(key [20]byte, topic string, p int32) error
	// CaughtUp is when follower id of the partition key last caught up,
	// in ms; Now is the node's clock.
	CaughtUp func(key [20]byte, id raftlite.NodeID) int64
	Now      func() time.Time
	// ProducerIDs allocates the ids of idempotent producers.
	ProducerIDs ProducerIDs
	// AdminShard is the shard the metadata controller runs on: every
	// call of Admin is made there.
	AdminShard int
	// Admin is the metadata controller, nil until it starts.
	Admin func() Admin
	// Meter counts and times the calls (nil: not metered).
	Meter *Meter
	// Groups are the consumer-group coordinators; nil: the group calls
	// answer ErrCoordinatorNotAvailable.
	Groups Coordinators
	// Txns are the transaction coordinators; nil: the transaction calls
	// answer ErrCoordinatorNotAvailable.
	Txns TxnCoordinators
}

// CompactionDefaults are the defaults of the compaction keys of a topic's
// configuration.
type CompactionDefaults struct {
	DeleteRetentionMs      int64
	MinCleanableDirtyRatio float64
}

// RouteReader reads the route table (cluster/routes.Table).
type RouteReader interface {
	Get(key [20]byte) (routes.Route, bool)
}

// ProducerIDs hands out producer ids.
type ProducerIDs interface {
	// Allocate is a producer id no other producer of the cluster has.
	Allocate() (int64, error)
}

// Admin is what the service asks of the metadata controller. Every
// method runs on shard Deps.AdminShard and calls done exactly once there.
type Admin interface {
	// Admit is nil when the controller can serve an admin call now:
	// its group is open, it is the metadata primary (when needPrimary),
	// and it has applied its term's first entry.
	Admit(needPrimary bool) error
	CreateTopic(req *service.CreateTopicRequest, done func(service.CreateTopicResult, error))
	DeleteTopic(req *service.DeleteTopicRequest, done func(metadata.TopicID, error))
	AddPartitions(req *service.AddPartitionsRequest, done func(int32, error))
	AlterTopicConfig(req *service.AlterTopicConfigRequest, done func(metadata.TopicConfig, error))
	// FetchOffsets reads a named consumer's offsets in the metadata
	// group.
	FetchOffsets(req *service.FetchOffsetsRequest, done func([]service.CommittedOffset, error))
	// DeleteOffsets drops consumer's offsets of parts in the metadata
	// group, or all of them when parts is empty.
	DeleteOffsets(consumer string, parts []service.TopicPartition, done func(struct{}, error))
	MovePrimary(req *service.MovePrimaryRequest, done func(service.MovePrimaryResult, error))
	Rebalance(req *service.RebalanceRequest, done func(service.RebalanceResult, error))
	// ChangeUser proposes cmd; timeout 0 is the controller's default.
	ChangeUser(cmd metadata.Command, timeout time.Duration, done func(*metadata.User, error))
	Reassign(req *service.ReassignRequest, done func(service.ReassignResult, error))
	ChangeRoster(req *service.RosterRequest, done func(service.RosterResult, error))
	// DeleteRecords commits the log start of partition p of topic (id)
	// at offset in the metadata, through the metadata primary from any
	// node.
	DeleteRecords(topic string, id metadata.TopicID, p int32, offset int64, done func(error))
	// CreateGroupsTopic creates the consumer groups' internal topic with
	// partitions partitions; a topic that exists already is success.
	CreateGroupsTopic(partitions int, done func(error))
	// CreateTxnsTopic creates the transaction coordinators' internal
	// topic with partitions partitions; one that exists is success.
	CreateTxnsTopic(partitions int, done func(error))
}

// Coordinators are the node's consumer-group coordinators, one per
// partition of the internal topic this node leads, each owned by the
// shard of its partition.
type Coordinators interface {
	// Locate is the shard that owns group's coordinator, and the lookup
	// to run there: it answers the coordinator, or the error to answer
	// when this node does not coordinate the group now. A group this node
	// cannot serve at all (the topic does not exist yet, its partition is
	// not in the metadata) answers err instead.
	Locate(group string) (owner *shard.Shard, lookup func() (*groups.Coordinator, error), err error)
	// Find is the node that coordinates group.
	Find(group string) (service.GroupCoordinator, error)
	// Shards are the shards coordinators run on, by shard id.
	Shards() []*shard.Shard
	// Loaded are the loaded coordinators of shard i, by partition.
	// REQUIRES: running on shard i.
	Loaded(i int) []*groups.Coordinator
}

// New is the service on d's ports. REQUIRES: the shards are started
// (d.Shards and d.Hosts set).
func New(d Deps) *Service {
	if d.DataDir != "" {
		d.DataDir = absDir(d.DataDir)
	}
	return &Service{d: d}
}

// FollowerReads is how many fetches this node served as a follower.
func (s *Service) FollowerReads() int64 { return s.followerReads.Load() }

// Meter is the service's request metrics (nil: not metered).
func (s *Service) Meter() *Meter { return s.d.Meter }

// svcErr turns any error met while serving into the service's *Error:
// a replica's *partition.Error keeps its kind (its hint gains the
// address); the node's parts (the controller, the balancer,
// reconciliation) answer in the service's kinds already, so no front
// end's code table is read backwards; anything else is ErrInternal with
// its text.
func (s *Service) svcErr(err error) error {
	if err == nil {
		return nil
	}
	var se *service.Error
	var pe *partition.Error
	switch {
	case errors.As(err, &se):
		return se
	case errors.As(err, &pe):
		e := &service.Error{Kind: pe.Kind, Message: pe.Message, RetryAfterMs: pe.RetryAfterMs}
		if pe.Leader > 0 {
			e.Hint = &service.Hint{NodeID: pe.Leader, Generation: pe.Generation, ClientAddr: s.d.AddrOf(pe.Leader)}
		}
		return e
	}
	return service.Errorf(service.ErrInternal, "%v", err)
}

// busy is the answer when a shard cannot take a call now.
func busy(err error) error {
	if errors.Is(err, shard.ErrStopped) {
		return service.Errorf(service.ErrNodeNotAvailable, "the node is shutting down")
	}
	e := service.Errorf(partition.ErrBusy, "the node is overloaded (%v); retry shortly", err)
	e.RetryAfterMs = 5
	return e
}

// outcome carries a call's result and error across shards.
type outcome[R any] struct {
	v   R
	err error
}

// RunOn runs fn on shard to and calls done with its outcome exactly
// once: on from, or on to when from is nil. fn runs inline when to is
// from; detach (when not nil) is called first when it does not, so the
// request can stop borrowing the caller's buffers. A shard that cannot
// take the call answers the service's error for it (the node is
// stopping, or overloaded).
func RunOn[R any](from, to *shard.Shard, detach func(), fn func(sh *shard.Shard, reply func(R, error)), done func(R, error)) {
	if to == from {
		fn(to, done)
		return
	}
	if detach != nil {
		detach()
	}
	call := func(sh *shard.Shard, reply func(outcome[R])) {
		fn(sh, func(v R, err error) { reply(outcome[R]{v, err}) })
	}
	finish := func(o outcome[R]) { done(o.v, o.err) }
	var err error
	if from == nil {
		err = to.Post(func() { call(to, finish) })
	} else {
		err = shard.CallAsync(from, to, call, finish)
	}
	if err != nil {
		var zero R
		done(zero, busy(err))
	}
}

// adminCall runs fn on the controller's shard once the controller admits
// the call, and answers through done on from (on the controller's shard
// when from is nil).
func adminCall[R any](s *Service, from *shard.Shard, needPrimary bool, fn func(c Admin, reply func(R, error)), done func(R, error)) {
	RunOn(from, s.d.Shards.Shard(s.d.AdminShard), nil, func(_ *shard.Shard, reply func(R, error)) {
		var zero R
		c := s.d.Admin()
		if c == nil {
			reply(zero, service.Errorf(service.ErrNodeNotAvailable, "the metadata group is not open on this node"))
			return
		}
		if err := c.Admit(needPrimary); err != nil {
			reply(zero, s.svcErr(err))
			return
		}
		fn(c, func(v R, err error) { reply(v, s.svcErr(err)) })
	}, done)
}

// holds says whether self is among reps.
func holds(reps []metadata.NodeID, self raftlite.NodeID) bool {
	for _, r := range reps {
		if raftlite.NodeID(r) == self {
			return true
		}
	}
	return false
}

// FetchCommitted reads the committed batches of an internal partition
// (ref) from offset from on, at most maxBytes, through fetch (the
// service's Fetch), and hands done their bytes and the offset they start
// from: from, or the log start when from lies below it (segments deleted
// below a coordinator's checkpoint, by compaction or retention), with no
// bytes. The groups' and the transactions' coordinators replay their
// partitions with it.
func FetchCommitted(fetch func(*shard.Shard, *service.FetchRequest, func(service.FetchResult, error)), sh *shard.Shard,
	ref service.PartitionRef, from int64, maxBytes uint32, done func(buf []byte, at int64, err error)) {
	fetch(sh, &service.FetchRequest{PartitionRef: ref, Offset: from, MaxBytes: maxBytes}, func(res service.FetchResult, err error) {
		var buf []byte
		if err == nil {
			buf, err = res.Records.AppendTo(nil)
			res.Records.Release()
		}
		switch {
		case err != nil && res.LogStartOffset > from:
			done(nil, res.LogStartOffset, nil)
		case err != nil:
			done(nil, from, err)
		default:
			done(buf, from, nil)
		}
	})
}
