package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/netio"
)

// listOffsets answers each partition from its primary: -2 the log start,
// -1 the high watermark (the last stable offset too: there are no
// transactions), else the first offset whose batch's max timestamp is at
// or after the time. -3 (max timestamp, v7) is INVALID_REQUEST here.
func (l *Listener) listOffsets(c *netio.Conn, req *kmsg.ListOffsetsRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	pending := 1
	finish := func() {
		if pending--; pending == 0 {
			reply(resp)
		}
	}
	resp.Topics = make([]kmsg.ListOffsetsResponseTopic, len(req.Topics))
	for ti := range req.Topics {
		t := &req.Topics[ti]
		rt := &resp.Topics[ti]
		*rt = kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.ListOffsetsResponseTopicPartition, len(t.Partitions))
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			rp := &rt.Partitions[pi]
			*rp = kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			if p.Timestamp < -2 {
				rp.ErrorCode = kerr.InvalidRequest.Code
				continue
			}
			epoch := p.CurrentLeaderEpoch
			if req.Version < 4 {
				epoch = -1
			}
			pending++
			l.b.ListOffsets(c.Shard(), &ListOffsetsReq{Topic: t.Topic, Partition: p.Partition, LeaderEpoch: epoch, Timestamp: p.Timestamp},
				func(res ListOffsetsRes) {
					if res.Err != nil {
						rp.ErrorCode = errorCode(res.Err)
					} else {
						rp.Offset, rp.Timestamp, rp.LeaderEpoch = res.Offset, res.Timestamp, res.LeaderEpoch
					}
					finish()
				})
		}
	}
	finish()
}

// initProducerID hands an idempotent producer an id from the node's
// producer ids, the same ones the native protocol hands out, so the
// partitions' duplicate and sequence checks apply to Kafka producers
// unchanged. Transactional ids are refused: there are no transactions.
func (l *Listener) initProducerID(c *netio.Conn, req *kmsg.InitProducerIDRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		reply(resp)
		return
	}
	id, epoch := int64(-1), int16(-1)
	if req.Version >= 3 {
		id, epoch = req.ProducerID, req.ProducerEpoch
	}
	l.b.InitProducerID(c.Shard(), id, epoch, func(id int64, epoch int16, err error) {
		if err != nil {
			resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = errorCode(err), -1, -1
		} else {
			resp.ProducerID, resp.ProducerEpoch = id, epoch
		}
		reply(resp)
	})
}
