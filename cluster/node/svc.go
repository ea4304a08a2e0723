package node

import (
	"fmt"
	"time"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/node/nodesvc"
	"github.com/corestream/corestream/cluster/service"
)

// newService wires the typed service (cluster/node/nodesvc) to n's
// parts: this is the only place that reads the Node for it, and what it
// hands over are values, the parts' own methods and the controller's
// admin face (ctrlAdmin). REQUIRES: n's shards are started (n.group,
// n.hosts set) and the groups host built.
func newService(n *Node) *nodesvc.Service {
	d := nodesvc.Deps{
		Self: n.self, ClusterID: n.clusterName, Version: Version, Storage: n.cfg.Storage,
		CompactionDefaults: nodesvc.CompactionDefaults{DeleteRetentionMs: deleteRetentionMsDefault, MinCleanableDirtyRatio: minDirtyRatioDefault},
		DataDir:            n.cfg.Node.DataDir, Roster: n.roster.nodes,
		AddrOf: n.addrOf, KafkaAddrOf: n.kafkaAddrOf,
		Shards: n.group, Hosts: n.hosts, ShardOf: n.shardOf,
		View: n.view.Load, Routes: &n.routes, Alive: n.alive, Ready: n.metadataReady, MetaRoute: n.metaRoute,
		Rebalancing: n.rebalancing.Load, Stopping: n.stopped.Load,
		OpenFailed: func(key [20]byte, topic string, p int32) error {
			if f, failed := n.openErrs.get(key); failed {
				return n.openErr(topic, p, f)
			}
			return nil
		},
		CaughtUp: n.lags.CaughtUp, Now: n.clock.Now, ProducerIDs: n.pids, Meter: nodesvc.NewMeter(n.clock),
		AdminShard: metaShard,
		Admin: func() nodesvc.Admin {
			if n.ctrl == nil {
				return nil
			}
			return ctrlAdmin{n.ctrl}
		},
	}
	if n.groups != nil {
		d.Groups = n.groups
	}
	if n.txns != nil {
		d.Txns = n.txns
	}
	return nodesvc.New(d)
}

// ctrlAdmin is the controller's admin face as the service's Admin port
// names it. Every call runs on shard metaShard (the service makes it
// there).
type ctrlAdmin struct{ c *controller }

var _ nodesvc.Admin = ctrlAdmin{}

func (a ctrlAdmin) Admit(needPrimary bool) error { return a.c.admit(needPrimary) }
func (a ctrlAdmin) CreateTopic(req *service.CreateTopicRequest, done func(service.CreateTopicResult, error)) {
	a.c.createTopic(req, done)
}
func (a ctrlAdmin) DeleteTopic(req *service.DeleteTopicRequest, done func(metadata.TopicID, error)) {
	a.c.deleteTopic(req, done)
}
func (a ctrlAdmin) AddPartitions(req *service.AddPartitionsRequest, done func(int32, error)) {
	a.c.addPartitions(req, done)
}
func (a ctrlAdmin) AlterTopicConfig(req *service.AlterTopicConfigRequest, done func(metadata.TopicConfig, error)) {
	a.c.alterTopicConfig(req, done)
}
func (a ctrlAdmin) FetchOffsets(req *service.FetchOffsetsRequest, done func([]service.CommittedOffset, error)) {
	a.c.fetchOffsets(req, done)
}
func (a ctrlAdmin) DeleteOffsets(consumer string, parts []service.TopicPartition, done func(struct{}, error)) {
	a.c.deleteOffsets(consumer, parts, done)
}
func (a ctrlAdmin) MovePrimary(req *service.MovePrimaryRequest, done func(service.MovePrimaryResult, error)) {
	a.c.svcMovePrimary(req, done)
}
func (a ctrlAdmin) Rebalance(req *service.RebalanceRequest, done func(service.RebalanceResult, error)) {
	a.c.svcRebalance(req, done)
}
func (a ctrlAdmin) ChangeUser(cmd metadata.Command, timeout time.Duration, done func(*metadata.User, error)) {
	a.c.changeUser(cmd, timeoutOf(timeout), done)
}
func (a ctrlAdmin) Reassign(req *service.ReassignRequest, done func(service.ReassignResult, error)) {
	a.c.svcReassign(req, done)
}
func (a ctrlAdmin) ChangeRoster(req *service.RosterRequest, done func(service.RosterResult, error)) {
	a.c.changeRoster(req, done)
}
func (a ctrlAdmin) DeleteRecords(topic string, id metadata.TopicID, p int32, offset int64, done func(error)) {
	a.c.deleteRecords(topic, id, p, offset, done)
}
func (a ctrlAdmin) CreateGroupsTopic(partitions int, done func(error)) {
	a.c.createGroupsTopic(partitions, done)
}

func (a ctrlAdmin) CreateTxnsTopic(partitions int, done func(error)) {
	a.c.createTxnsTopic(partitions, done)
}

// Allocate implements nodesvc.ProducerIDs.
func (p *producerIDs) Allocate() (int64, error) { return p.allocate() }

// clusterID names the cluster in handshakes: its roster's size.
func (n *Node) clusterID() string {
	return fmt.Sprintf("corestream-%d", len(n.cfg.Roster()))
}

// ownerShard is the shard that owns partition p of topic, -1 when the
// View has no such partition.
func (n *Node) ownerShard(topic string, p int32) int {
	t := n.view.Load().Topics[topic]
	if t == nil || p < 0 || int(p) >= t.Partitions() {
		return -1
	}
	return n.shardOf(t.ID, p)
}

// alive reports whether node id is believed up.
func (n *Node) alive(id int32) bool { return id == int32(n.self) || n.peerAlive(id) }

// liveSignal is the liveness signal handed to the parts: this node is
// alive, a peer while the transport heard from it lately (no transport:
// a single node).
type liveSignal struct {
	self  int32
	peers Transport
}

// Alive reports whether node id is believed up.
func (l liveSignal) Alive(id int32) bool {
	return id == l.self || (l.peers != nil && l.peers.Alive(id))
}

// peerAlive reports whether peer id was heard from recently.
func (n *Node) peerAlive(id int32) bool { return n.peers != nil && n.peers.Alive(id) }

// clusterStatus and topicMetadata are the service's, for the node's
// tests and metrics.
func (n *Node) clusterStatus() service.ClusterStatus                  { return n.svc.Status() }
func (n *Node) topicMetadata(t *metadata.Topic) service.TopicMetadata { return n.svc.TopicMetadata(t) }

// unknownPartition says which of name and p does not exist (the
// balancer's answer; the service answers the same).
func unknownPartition(name string, p int32, t *metadata.Topic) error {
	if t == nil {
		return service.Errorf(service.ErrUnknownTopicOrPartition, "topic %q does not exist", name)
	}
	return service.Errorf(service.ErrUnknownTopicOrPartition, "topic %q has partitions 0..%d, not %d", name, t.Partitions()-1, p)
}

func containsID(s []int32, id int32) bool {
	for _, x := range s {
		if x == id {
			return true
		}
	}
	return false
}
