package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio"
)

// listOffsets answers each partition from its primary: -2 the log start,
// -1 the high watermark (the last stable offset too: there are no
// transactions), -3 (max timestamp, v7+, KIP-734) the first committed
// record with the largest timestamp and that timestamp, else the first
// offset whose batch's max timestamp is at or after the time.
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
			if code := refuseConsumerOffsets(t.Topic); code != 0 {
				rp.ErrorCode = code
				continue
			}
			if p.Timestamp < -3 || p.Timestamp == -3 && req.Version < 7 {
				// -4 and -5 are tiered storage's (v8+, not served);
				// -3 is max timestamp from v7 (KIP-734).
				rp.ErrorCode = kerr.InvalidRequest.Code
				continue
			}
			ref := service.PartitionRef{Topic: t.Topic, Partition: p.Partition, Generation: p.CurrentLeaderEpoch}
			if req.Version < 4 {
				ref.Generation = service.GenerationUnknown
			}
			pending++
			l.svc.ListOffsets(c.Shard(), &service.ListOffsetsRequest{PartitionRef: ref, Timestamp: p.Timestamp,
				Isolation: service.Isolation(max(req.IsolationLevel, 0))},
				func(res service.ListOffsetsResult, err error) {
					if err != nil {
						rp.ErrorCode = errorCode(err)
					} else {
						// The leader epoch is the generation of the
						// batch found (of the last one before the end
						// for latest), which a consumer later hands to
						// OffsetForLeaderEpoch to detect truncation.
						rp.Offset, rp.Timestamp, rp.LeaderEpoch = res.Offset, res.Timestamp, res.Generation
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
// unchanged; a transactional producer gets its id and a new epoch from
// its transaction coordinator (txns.go).
func (l *Listener) initProducerID(c *netio.Conn, req *kmsg.InitProducerIDRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	if req.TransactionalID != nil {
		l.initTxnProducer(c, req, reply)
		return
	}
	ask := service.InitProducerRequest{ProducerID: -1, ProducerEpoch: -1}
	if req.Version >= 3 {
		ask.ProducerID, ask.ProducerEpoch = req.ProducerID, req.ProducerEpoch
	}
	res, err := l.svc.InitProducer(ask)
	if err != nil {
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = errorCode(err), -1, -1
	} else {
		resp.ProducerID, resp.ProducerEpoch = res.ProducerID, res.ProducerEpoch
	}
	reply(resp)
}
