package kafka

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/cluster/frontend"
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
//
// Each partition's records are one batch (the replica refuses more) and
// a slice of the frame being delivered, and every partition's Produce is
// called before OnFrame returns: so each may lend the read buffer to the
// log (frontend.Lend), which keeps it only for a large batch it writes
// in place on this shard; a partition on another shard gets a copy. The
// request counts toward moving the connection to the shard that owns
// its partitions when that is one other shard (Config.Mover).
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
	pending := 1                // one for this loop, released after it
	leaders := map[int32]bool{} // nodes named in CurrentLeader hints
	owner := frontend.NoOwner   // of the partitions produced to (frontend.Fold)
	var tracked func()          // the Mover's, set before the loop's own finish
	finish := func() {
		pending--
		if pending > 0 {
			return
		}
		if acks != acksNone {
			l.addLeaderEndpoints(resp, leaders)
			reply(resp)
		}
		tracked() // answered, and no call of the request is outstanding
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
			if code := refuseConsumerOffsets(t.Topic); code != 0 {
				rp.ErrorCode = code
				rp.ErrorMessage = kmsg.StringPtr(ConsumerOffsetsTopic + " is the broker's own; clients may not write it")
				continue
			}
			if len(p.Records) == 0 {
				rp.ErrorCode = kerr.CorruptMessage.Code
				rp.ErrorMessage = kmsg.StringPtr("no record batch")
				continue
			}
			pending++
			owner = frontend.Fold(owner, l.cfg.Mover.Route(c, t.Topic, p.Partition))
			req := &service.ProduceRequest{PartitionRef: service.PartitionRef{Topic: t.Topic, Partition: p.Partition,
				Generation: service.GenerationUnknown}, Acks: ours, Timeout: timeout, Records: p.Records, Lend: frontend.Lend(c)}
			l.svc.Produce(c.Shard(), req, func(res service.ProduceResult, err error) {
				if err != nil {
					rp.ErrorCode, rp.ErrorMessage = errorCode(err), errorMessage(err)
					if id, epoch, ok := leaderHint(err); ok {
						rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = id, epoch
						leaders[id] = true
					}
				} else {
					rp.BaseOffset, rp.LogStartOffset = res.BaseOffset, res.LogStartOffset
				}
				finish()
			})
		}
	}
	tracked = l.cfg.Mover.Track(c, &c.Context().(*conn).homing, owner)
	finish()
}

// leaderHint is the primary a refused produce names (KIP-951: the
// partition's CurrentLeader), when the refusal is one a client answers
// by moving there: NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH.
func leaderHint(err error) (id, epoch int32, ok bool) {
	var se *service.Error
	if !errors.As(err, &se) || se.Hint == nil || se.Hint.NodeID <= 0 {
		return 0, 0, false
	}
	switch errorCode(err) {
	case kerr.NotLeaderForPartition.Code, kerr.FencedLeaderEpoch.Code:
		return se.Hint.NodeID, se.Hint.Generation, true
	}
	return 0, 0, false
}

// addLeaderEndpoints lists in resp the Kafka addresses of the leaders its
// partitions' hints name, so that a client moves to them without first
// refreshing its metadata (KIP-951; versions 10 and later carry them).
func (l *Listener) addLeaderEndpoints(resp *kmsg.ProduceResponse, leaders map[int32]bool) {
	if len(leaders) == 0 || resp.Version < 10 {
		return
	}
	for _, b := range l.brokers() {
		if leaders[b.id] {
			rb := kmsg.NewProduceResponseBroker()
			rb.NodeID, rb.Host, rb.Port = b.id, b.host, b.port
			resp.Brokers = append(resp.Brokers, rb)
		}
	}
}
