package groupshost

import (
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/shard"
)

// PartitionOf is the partition of the groups' internal topic that holds
// group, the one a transaction that commits the group's offsets adds
// (AddOffsetsToTxn): an error while the topic does not exist or the
// metadata is not loaded.
func (h *Host) PartitionOf(group string) (int32, error) {
	routes, err := h.data.GroupsRoutes()
	if err == nil && routes == nil {
		err = h.needTopic(group)
	}
	if err != nil {
		return -1, err
	}
	return groupsPartitionOf(group, len(routes)), nil
}

// EndTxn decides the offsets producer pid's transaction staged in the
// coordinator of partition p, once the transaction's marker is written
// there: made committed offsets (commit) or dropped. done runs on the
// partition's shard; an error (this node does not coordinate p now, or
// the offsets' records were not written) asks for a retry.
// REQUIRES: on the shard that owns p's replica.
func (h *Host) EndTxn(sh *shard.Shard, p int32, pid int64, commit bool, done func(error)) {
	i := sh.ID()
	if i < 0 || i >= len(h.shards) || h.shards[i].sh != sh {
		done(service.Errorf(service.ErrCoordinatorNotAvailable, "groups: shard %d runs no group coordinators", i))
		return
	}
	pt := h.shards[i].parts[p]
	if pt == nil || !pt.loaded {
		done(service.Errorf(service.ErrCoordinatorLoading, "%s partition %d is not loaded on node %d; retry", metadata.GroupsTopic, p, h.d.Self))
		return
	}
	pt.coord.EndTxn(pid, commit, done)
}
