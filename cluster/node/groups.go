package node

import (
	"context"
	"errors"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/groups"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/node/groupshost"
)

// newGroups is the node's host of consumer-group coordinators
// (cluster/node/groupshost), to start once the service it calls exists.
// REQUIRES: the shards are started.
func (n *Node) newGroups() *groupshost.Host {
	parts := n.cfg.Cluster.GroupsPartitions
	if parts <= 0 {
		parts = config.GroupsPartitionsDefault // a config made without config.Default
	}
	cfg := groups.DefaultConfig
	cfg.CheckpointRecords, cfg.CheckpointBytes = n.cfg.Cluster.GroupsCheckpointRecords, n.cfg.Cluster.GroupsCheckpointBytes
	return groupshost.New(groupshost.Deps{Self: int32(n.self), Partitions: parts, Config: cfg,
		MetaPrimary: func() int32 { id, _ := n.metaRoute(); return id }, Ready: n.metadataReady, AddrOf: n.addrOf, KafkaAddrOf: n.kafkaAddrOf,
		AskCreate:  n.askGroupsTopic(),
		OwnerShard: func(p int32) int { return n.ownerShard(metadata.GroupsTopic, p) },
		Infof:      n.log.Info, Clock: n.clock,
		View: n.view.Load, Ends: n.primaryEnds, MetaState: n.onMetaState}, n.group)
}

// askGroupsTopic is the groups host's AskCreate: a GroupsTopic frame to
// the metadata primary over the peer link the metadata shard owns (nil
// on a node without peers).
func (n *Node) askGroupsTopic() func(primary int32) {
	if n.peers == nil {
		return nil
	}
	peers := n.peers
	return func(primary int32) {
		_ = n.group.Shard(metaShard).Post(func() { peers.RequestGroupsTopic(primary) })
	}
}

// errGroupLagTimeout is the wait for the metadata shard running past
// the scrape's deadline.
var errGroupLagTimeout = errors.New("node: the metadata shard did not answer the group offsets in time")

// onMetaState runs read on the metadata shard with the applied state
// (nil before the metadata group opens) and waits for it within ctx: the
// groups host's view of the named-consumer offsets (groupshost.Deps).
func (n *Node) onMetaState(ctx context.Context, read func(st *metadata.State)) error {
	done := make(chan struct{})
	err := n.group.Shard(metaShard).Post(func() {
		defer close(done)
		if c := n.ctrl; c != nil {
			read(c.State())
			return
		}
		read(nil)
	})
	if err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return errGroupLagTimeout
	}
}
