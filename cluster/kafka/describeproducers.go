package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio"
)

// describeProducersKey is DescribeProducers (KIP-664), version 0: what
// kafka-transactions.sh describe-producers and kadm's DescribeProducers
// ask a partition's leader.
const describeProducersKey int16 = 61

// describeProducers answers each partition from its primary's producer
// table (the idempotent and transactional producers it remembers, the
// same that decide duplicates): producer id and epoch, the last sequence
// written (-1 when none in this epoch), the largest timestamp of its last
// batch, and the first offset of its open transaction (-1: none). A
// partition elsewhere answers NOT_LEADER_OR_FOLLOWER, as Kafka's
// followers do; the coordinator epoch is -1 (the markers' coordinator
// epoch is not kept per producer).
func (l *Listener) describeProducers(c *netio.Conn, req *kmsg.DescribeProducersRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	pending := 1
	finish := func() {
		if pending--; pending == 0 {
			reply(resp)
		}
	}
	resp.Topics = make([]kmsg.DescribeProducersResponseTopic, len(req.Topics))
	for ti := range req.Topics {
		t := &req.Topics[ti]
		rt := &resp.Topics[ti]
		*rt = kmsg.NewDescribeProducersResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.DescribeProducersResponseTopicPartition, len(t.Partitions))
		for pi, p := range t.Partitions {
			rp := &rt.Partitions[pi]
			*rp = kmsg.NewDescribeProducersResponseTopicPartition()
			rp.Partition = p
			if code := refuseConsumerOffsets(t.Topic); code != 0 {
				rp.ErrorCode = code
				continue
			}
			pending++
			ref := service.PartitionRef{Topic: t.Topic, Partition: p, Generation: service.GenerationUnknown}
			l.svc.DescribePartition(c.Shard(), ref, func(d service.PartitionDetail, err error) {
				if err != nil {
					rp.ErrorCode = errorCode(err)
					if rp.ErrorCode != kerr.UnknownTopicOrPartition.Code {
						rp.ErrorMessage = kmsg.StringPtr(err.Error())
					}
					finish()
					return
				}
				rp.ActiveProducers = make([]kmsg.DescribeProducersResponseTopicPartitionActiveProducer, len(d.Producers))
				for i, ps := range d.Producers {
					ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
					ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = ps.ProducerID, int32(ps.ProducerEpoch), ps.LastSequence
					ap.LastTimestamp, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = ps.LastTimestampMs, -1, ps.TxnStartOffset
					rp.ActiveProducers[i] = ap
				}
				finish()
			})
		}
	}
	finish()
}
