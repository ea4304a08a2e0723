package kafka

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio"
)

// Transactions (docs/design/transactions.md). The handlers decode, call
// the service's transaction calls (service.Txns) and encode; the
// coordinator, its state and the markers are the service's. Versions
// are transaction version 1's (versions.go): the client adds every
// partition it writes to, and the epoch stays through its transactions.

const (
	addPartitionsToTxnKey   int16 = 24
	addOffsetsToTxnKey      int16 = 25
	endTxnKey               int16 = 26
	txnOffsetCommitKey      int16 = 28
	describeTransactionsKey int16 = 65
	listTransactionsKey     int16 = 66
)

// fencedCode is code as a request of version v of an API that learnt
// PRODUCER_FENCED at version since answers it: older versions get
// INVALID_PRODUCER_EPOCH, as Kafka answers them (KIP-588).
func fencedCode(code int16, v, since int16) int16 {
	if code == kerr.ProducerFenced.Code && v < since {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}

// initTxnProducer is InitProducerId with a transactional id: its
// coordinator bumps the id's epoch, fencing the producer that held it.
func (l *Listener) initTxnProducer(c *netio.Conn, req *kmsg.InitProducerIDRequest, reply func(kmsg.Response)) {
	ask := &service.InitTxnProducerRequest{TransactionalID: *req.TransactionalID, TimeoutMs: req.TransactionTimeoutMillis, ProducerID: -1, ProducerEpoch: -1}
	if req.Version >= 3 {
		ask.ProducerID, ask.ProducerEpoch = req.ProducerID, req.ProducerEpoch
	}
	l.svc.InitTxnProducer(c.Shard(), ask, func(res service.InitProducerResult, err error) {
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode = fencedCode(errorCode(err), req.Version, 4)
		resp.ProducerID, resp.ProducerEpoch = res.ProducerID, res.ProducerEpoch
		if err != nil {
			resp.ProducerID, resp.ProducerEpoch = -1, -1
		}
		reply(resp)
	})
}

// addPartitionsToTxn adds the partitions to the transaction: every one
// gets the answer, or, when some are refused, the others
// OPERATION_NOT_ATTEMPTED (none is added), as Kafka answers.
func (l *Listener) addPartitionsToTxn(c *netio.Conn, req *kmsg.AddPartitionsToTxnRequest, reply func(kmsg.Response)) {
	ar := &service.AddPartitionsToTxnRequest{TxnProducer: service.TxnProducer{TransactionalID: req.TransactionalID,
		ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch}}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			ar.Partitions = append(ar.Partitions, service.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	l.svc.AddPartitionsToTxn(c.Shard(), ar, func(entries []error, err error) {
		resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
		codes := make([]int16, len(ar.Partitions))
		refused := false
		for i := range codes {
			switch {
			case err != nil:
				codes[i] = fencedCode(errorCode(err), req.Version, 2)
			case i < len(entries) && entries[i] != nil:
				codes[i], refused = errorCode(entries[i]), true
			}
		}
		i := 0
		for _, t := range req.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, codes[i]
				if refused && rp.ErrorCode == 0 {
					rp.ErrorCode = kerr.OperationNotAttempted.Code
				}
				rt.Partitions = append(rt.Partitions, rp)
				i++
			}
			resp.Topics = append(resp.Topics, rt)
		}
		reply(resp)
	})
}

// addOffsetsToTxn adds the group's offsets to the transaction.
func (l *Listener) addOffsetsToTxn(c *netio.Conn, req *kmsg.AddOffsetsToTxnRequest, reply func(kmsg.Response)) {
	ar := &service.AddOffsetsToTxnRequest{TxnProducer: service.TxnProducer{TransactionalID: req.TransactionalID,
		ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch}, Group: req.Group}
	l.svc.AddOffsetsToTxn(c.Shard(), ar, func(err error) {
		resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
		resp.ErrorCode = fencedCode(errorCode(err), req.Version, 2)
		reply(resp)
	})
}

// endTxn commits or aborts the transaction.
func (l *Listener) endTxn(c *netio.Conn, req *kmsg.EndTxnRequest, reply func(kmsg.Response)) {
	er := &service.EndTxnRequest{TxnProducer: service.TxnProducer{TransactionalID: req.TransactionalID,
		ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch}, Commit: req.Commit}
	l.svc.EndTxn(c.Shard(), er, func(err error) {
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = fencedCode(errorCode(err), req.Version, 2)
		reply(resp)
	})
}

// txnOffsetCommit stages the group's offsets in the transaction.
func (l *Listener) txnOffsetCommit(c *netio.Conn, req *kmsg.TxnOffsetCommitRequest, reply func(kmsg.Response)) {
	tr := &service.TxnOffsetCommitRequest{TxnProducer: service.TxnProducer{TransactionalID: req.TransactionalID,
		ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch}, Group: req.Group, Generation: -1}
	if req.Version >= 3 {
		tr.MemberID, tr.Generation = req.MemberID, req.Generation
	}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			o := service.OffsetCommit{Topic: t.Topic, Partition: p.Partition, Offset: p.Offset}
			if p.Metadata != nil {
				o.Metadata = *p.Metadata
			}
			tr.Offsets = append(tr.Offsets, o)
		}
	}
	l.svc.TxnOffsetCommit(c.Shard(), tr, func(entries []error, err error) {
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		i := 0
		for _, t := range req.Topics {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition = p.Partition
				switch {
				case err != nil:
					rp.ErrorCode = errorCode(err)
				case i < len(entries):
					rp.ErrorCode = errorCode(entries[i])
				}
				rt.Partitions = append(rt.Partitions, rp)
				i++
			}
			resp.Topics = append(resp.Topics, rt)
		}
		reply(resp)
	})
}

// describeTransactions describes each transactional id asked, in order.
func (l *Listener) describeTransactions(c *netio.Conn, req *kmsg.DescribeTransactionsRequest, reply func(kmsg.Response)) {
	l.svc.DescribeTransactions(c.Shard(), req.TransactionalIDs, func(ds []service.TxnDescription) {
		resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
		for _, d := range ds {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID, st.ErrorCode = d.TransactionalID, errorCode(d.Err)
			st.State, st.TimeoutMillis, st.StartTimestamp = d.State, d.TimeoutMs, d.StartMs
			st.ProducerID, st.ProducerEpoch = d.ProducerID, d.ProducerEpoch
			if d.Err != nil {
				st.ProducerID, st.ProducerEpoch, st.StartTimestamp = -1, -1, -1
			}
			for _, p := range d.Partitions {
				if n := len(st.Topics); n > 0 && st.Topics[n-1].Topic == p.Topic {
					st.Topics[n-1].Partitions = append(st.Topics[n-1].Partitions, p.Partition)
					continue
				}
				t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
				t.Topic, t.Partitions = serviceToKafkaTopic(p.Topic), []int32{p.Partition}
				st.Topics = append(st.Topics, t)
			}
			resp.TransactionStates = append(resp.TransactionStates, st)
		}
		reply(resp)
	})
}

// txnStates are the states ListTransactions filters by (Kafka's names).
var txnStates = map[string]bool{"Empty": true, "Ongoing": true, "PrepareCommit": true, "PrepareAbort": true,
	"CompleteCommit": true, "CompleteAbort": true, "Dead": true}

// listTransactions lists the transactional ids this node coordinates.
func (l *Listener) listTransactions(c *netio.Conn, req *kmsg.ListTransactionsRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	lr := &service.ListTransactionsRequest{ProducerIDs: req.ProducerIDFilters}
	for _, s := range req.StateFilters {
		if txnStates[s] {
			lr.States = append(lr.States, s)
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, s)
		}
	}
	if len(req.StateFilters) > 0 && len(lr.States) == 0 {
		reply(resp) // only unknown states asked: none matches
		return
	}
	l.svc.ListTransactions(c.Shard(), lr, func(ts []service.TxnSummary, err error) {
		resp.ErrorCode = errorCode(err)
		for _, t := range ts {
			st := kmsg.NewListTransactionsResponseTransactionState()
			st.TransactionalID, st.ProducerID, st.TransactionState = t.TransactionalID, t.ProducerID, t.State
			resp.TransactionStates = append(resp.TransactionStates, st)
		}
		reply(resp)
	})
}
