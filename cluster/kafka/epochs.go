package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio"
)

// offsetForLeaderEpoch answers OffsetForLeaderEpoch from each partition's
// primary: for the leader epoch asked (our generation), the largest one
// at or below it that the log holds and the offset where the next one
// starts (the high watermark for the current one). Consumers send it
// after a leader change with the epoch of the last record they read: an
// end offset below their position means the log was truncated under
// them, and they resume from it. current_leader_epoch (v2+) fences as in
// Fetch. replica_id is ignored: corestream's followers replicate through
// their own protocol, so every asker is a consumer.
func (l *Listener) offsetForLeaderEpoch(c *netio.Conn, req *kmsg.OffsetForLeaderEpochRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	pending := 1
	finish := func() {
		if pending--; pending == 0 {
			reply(resp)
		}
	}
	resp.Topics = make([]kmsg.OffsetForLeaderEpochResponseTopic, len(req.Topics))
	for ti := range req.Topics {
		t := &req.Topics[ti]
		rt := &resp.Topics[ti]
		*rt = kmsg.NewOffsetForLeaderEpochResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.OffsetForLeaderEpochResponseTopicPartition, len(t.Partitions))
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			rp := &rt.Partitions[pi]
			*rp = kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			rp.Partition = p.Partition
			ref := service.PartitionRef{Topic: t.Topic, Partition: p.Partition, Generation: p.CurrentLeaderEpoch}
			if req.Version < 2 || ref.Generation < 0 {
				ref.Generation = service.GenerationUnknown
			}
			pending++
			l.svc.OffsetForGeneration(c.Shard(), &service.OffsetForGenerationRequest{PartitionRef: ref, Asked: p.LeaderEpoch},
				func(res service.OffsetForGenerationResult, err error) {
					rp.LeaderEpoch, rp.EndOffset = res.Generation, res.EndOffset
					if err != nil {
						rp.ErrorCode, rp.LeaderEpoch, rp.EndOffset = errorCode(err), -1, -1
					}
					finish()
				})
		}
	}
	finish()
}
