package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio"
)

// deleteRecordsKey is DeleteRecords, versions 0-2 (as Kafka 3.9): what
// kadm's DeleteRecords and kafka-delete-records.sh send each partition's
// leader.
const deleteRecordsKey int16 = 21

// deleteRecords moves each partition's log start to the offset asked
// (-1: the high watermark) and answers it as the low watermark: the
// service checks the offset on the primary and commits the start in the
// metadata, which every replica reads it from. A partition led elsewhere
// is NOT_LEADER_OR_FOLLOWER, an offset past the high watermark
// OFFSET_OUT_OF_RANGE, an offset at or below the current start changes
// nothing and answers that start, as Kafka answers.
func (l *Listener) deleteRecords(c *netio.Conn, req *kmsg.DeleteRecordsRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	pending := 1
	finish := func() {
		if pending--; pending == 0 {
			reply(resp)
		}
	}
	resp.Topics = make([]kmsg.DeleteRecordsResponseTopic, len(req.Topics))
	for ti := range req.Topics {
		t := &req.Topics[ti]
		rt := &resp.Topics[ti]
		*rt = kmsg.NewDeleteRecordsResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.DeleteRecordsResponseTopicPartition, len(t.Partitions))
		for pi, p := range t.Partitions {
			rp := &rt.Partitions[pi]
			*rp = kmsg.NewDeleteRecordsResponseTopicPartition()
			rp.Partition, rp.LowWatermark = p.Partition, -1
			if code := refuseConsumerOffsets(t.Topic); code != 0 {
				rp.ErrorCode = code
				continue
			}
			pending++
			dr := &service.DeleteRecordsRequest{PartitionRef: service.PartitionRef{Topic: t.Topic, Partition: p.Partition, Generation: service.GenerationUnknown},
				Offset: p.Offset}
			l.svc.DeleteRecords(c.Shard(), dr, func(start int64, err error) {
				if err != nil {
					rp.ErrorCode = errorCode(err)
				} else {
					rp.LowWatermark = start
				}
				finish()
			})
		}
	}
	finish()
}
