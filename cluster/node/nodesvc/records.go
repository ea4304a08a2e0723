package nodesvc

import (
	"fmt"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"
)

// DeleteRecords implements service.Data: the primary checks the offset
// against its high watermark, the new start is committed in the
// metadata (which every replica reads it from, at once and after a
// restart: metadata.OpDeleteRecords), and the primary takes it at once
// rather than at its next reconcile, so that the reads it answers next
// already start there.
func (s *Service) DeleteRecords(from *shard.Shard, req *service.DeleteRecordsRequest, done func(int64, error)) {
	if metadata.IsInternalTopic(req.Topic) {
		done(-1, service.Errorf(service.ErrAuthorization,
			"topic %q is the broker's own (consumer groups' state); its records are deleted by the broker only", req.Topic))
		return
	}
	gen, off := req.Generation, req.Offset
	onReplica(s, from, req.PartitionRef, nil, func(r *partition.Replica, t *metadata.Topic, reply func(int64, error)) {
		if err := r.CheckRoute(gen); err != nil {
			reply(-1, err)
			return
		}
		if t.Config.CleanupPolicy == metadata.CleanupCompact {
			reply(-1, service.Errorf(service.ErrPolicyViolation,
				"the records of %s/%d cannot be deleted: its cleanup.policy is compact (give compact,delete to allow it)", t.Name, r.Config().Partition))
			return
		}
		hw := r.HighWatermark()
		if off == service.DeleteRecordsToHighWatermark {
			off = hw
		}
		if off < 0 || off > hw {
			reply(-1, &partition.Error{Kind: partition.ErrOffsetOutOfRange,
				Message: fmt.Sprintf("%s/%d: cannot delete the records below %d: the high watermark is %d", t.Name, r.Config().Partition, off, hw)})
			return
		}
		if start := r.StartOffset(); off <= start {
			reply(start, nil)
			return
		}
		sh := r.Config().Sched.(*shard.Shard)
		name, id, p := t.Name, t.ID, r.Config().Partition
		adminCall(s, sh, false, func(c Admin, reply func(struct{}, error)) {
			c.DeleteRecords(name, id, p, off, func(err error) { reply(struct{}{}, err) })
		}, func(_ struct{}, err error) {
			if err != nil {
				reply(-1, err)
				return
			}
			r.SetRecordsStart(off)
			reply(r.StartOffset(), nil)
		})
	}, done)
}
