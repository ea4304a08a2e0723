package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio"
)

// Kafka's acks levels.
const (
	acksNone   int16 = 0  // no answer at all
	acksLeader int16 = 1  // durable on the primary
	acksAll    int16 = -1 // committed by a quorum of the replicas
)

// produce sends each partition's batch to its primary's shard and
// answers once every partition has answered. acks 1 is acknowledged when
// the batch is durable on the primary, -1 when a quorum of the replicas
// has it (our commit; Kafka waits for the ISR, we never wait for more
// than a majority, docs/kafka.md), 0 not at all.
func (l *Listener) produce(c *netio.Conn, req *kmsg.ProduceRequest, reply func(kmsg.Response), noReply func()) {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	acks := req.Acks
	if acks != acksNone && acks != acksLeader && acks != acksAll {
		// Kafka answers every partition with INVALID_REQUIRED_ACKS.
		for _, t := range req.Topics {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, kerr.InvalidRequiredAcks.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		reply(resp)
		return
	}
	if acks == acksNone {
		// No answer is ever sent: free the request's place now so later
		// answers need not wait for it.
		noReply()
	}
	ours := service.AcksPrimary
	if acks == acksAll {
		ours = service.AcksQuorum
	}
	timeout := time.Duration(max(req.TimeoutMillis, 0)) * time.Millisecond
	pending := 1 // one for this loop, released after it
	finish := func() {
		pending--
		if pending == 0 && acks != acksNone {
			reply(resp)
		}
	}
	resp.Topics = make([]kmsg.ProduceResponseTopic, len(req.Topics))
	for ti := range req.Topics {
		t := &req.Topics[ti]
		rt := &resp.Topics[ti]
		*rt = kmsg.NewProduceResponseTopic()
		rt.Topic = t.Topic
		rt.Partitions = make([]kmsg.ProduceResponseTopicPartition, len(t.Partitions))
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			rp := &rt.Partitions[pi]
			*rp = kmsg.NewProduceResponseTopicPartition()
			rp.Partition = p.Partition
			if len(p.Records) == 0 {
				rp.ErrorCode = kerr.CorruptMessage.Code
				rp.ErrorMessage = kmsg.StringPtr("no record batch")
				continue
			}
			pending++
			req := &service.ProduceRequest{PartitionRef: service.PartitionRef{Topic: t.Topic, Partition: p.Partition,
				Generation: service.GenerationUnknown}, Acks: ours, Timeout: timeout, Records: p.Records}
			l.svc.Produce(c.Shard(), req, func(res service.ProduceResult, err error) {
				if err != nil {
					rp.ErrorCode, rp.ErrorMessage = errorCode(err), errorMessage(err)
				} else {
					rp.BaseOffset, rp.LogStartOffset = res.BaseOffset, res.LogStartOffset
				}
				finish()
			})
		}
	}
	finish()
}
