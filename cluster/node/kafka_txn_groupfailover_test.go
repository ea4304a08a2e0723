package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Exactly-once across a failover of the group's coordinator: offsets a
// transaction staged (TxnOffsetCommit) on the group's coordinator survive
// the stop of its node while the transaction is open, and the commit
// marker that reaches the next coordinator commits them with the
// transaction's records. (Staged offsets held only in memory were lost
// there: the transaction committed its records without its offsets, and
// the consumer read its input again.)
func TestKafkaTxnOffsetsSurviveGroupFailover(t *testing.T) {
	tc, kports := startKafkaCluster(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	adm := kadm.NewClient(kafkaClient(t, kports))
	kafkaCreateRetrying(t, ctx, adm, "eos-out", 1, 3)
	kafkaCreateRetrying(t, ctx, adm, "eos-in", 1, 3)
	const txnID = "eos-app"
	prod := kafkaClient(t, kports, kgo.TransactionalID(txnID), kgo.TransactionTimeout(60*time.Second),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := prod.ProduceSync(ctx, &kgo.Record{Topic: "eos-out", Value: []byte("out")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := prod.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The coordinators, as the nodes themselves answer: the transaction's
	// (DescribeTransactions says which node coordinates the id), and a
	// group's, the one node that answers its offsets rather than
	// NOT_COORDINATOR (what FindCoordinator answers may still move while
	// the groups' partitions elect their first primaries).
	d, err := adm.DescribeTransactions(ctx, txnID)
	if err != nil || d[txnID].Err != nil {
		t.Fatalf("describe the transaction: %v %+v", err, d)
	}
	txnCoord := d[txnID].Coordinator
	coordOf := func(group string) int32 {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			var answering []int32
			for id := int32(1); id <= 3; id++ {
				if _, code, err := fetchOffset(ctx, prod.Broker(int(id)), group, "eos-in", false); err == nil && code == 0 {
					answering = append(answering, id)
				}
			}
			if len(answering) == 1 {
				return answering[0]
			}
			if time.Now().After(deadline) {
				t.Fatalf("group %q: nodes %v answer its offsets, want one", group, answering)
			}
			time.Sleep(50 * time.Millisecond) // the groups' topic still being created: retriable
		}
	}
	// A group whose coordinator is not the transaction's.
	group, groupCoord := "", int32(0)
	for i := 0; group == ""; i++ {
		name := fmt.Sprintf("eos-readers-%d", i)
		if c := coordOf(name); c != txnCoord {
			group, groupCoord = name, c
		}
	}
	// AddOffsetsToTxn, then the offset staged on the group's coordinator.
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = txnID, pid, epoch, group
	if resp, err := ao.RequestWith(ctx, prod); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v %+v", err, resp)
	}
	tx := kmsg.NewPtrTxnOffsetCommitRequest()
	tx.TransactionalID, tx.Group, tx.ProducerID, tx.ProducerEpoch, tx.Generation = txnID, group, pid, epoch, -1
	tt := kmsg.NewTxnOffsetCommitRequestTopic()
	tt.Topic = "eos-in"
	tp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	tp.Partition, tp.Offset = 0, 42
	tt.Partitions = append(tt.Partitions, tp)
	tx.Topics = append(tx.Topics, tt)
	if resp, err := tx.RequestWith(ctx, prod.Broker(int(groupCoord))); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("TxnOffsetCommit: %v %+v", err, resp)
	}
	// The group's coordinator stops with the transaction open.
	tc.stopNode(int(groupCoord - 1))
	var live []string
	for i, addr := range kports {
		if int32(i+1) != groupCoord {
			live = append(live, addr)
		}
	}
	// The commit's markers go to the partitions' primaries now, the
	// groups' partition's on another node.
	if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		cl, err := kgo.NewClient(kgo.SeedBrokers(live...), kgo.RetryTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		off, code, err := fetchOffset(ctx, cl, group, "eos-in", true)
		cl.Close()
		if err == nil && code == 0 {
			if off != 42 {
				t.Fatalf("after the commit the group's offset is %d, want the transaction's 42", off)
			}
			return
		}
		if e := kerr.ErrorForCode(code); err == nil && !kerr.IsRetriable(e) {
			t.Fatalf("offset fetch: %v", e)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no stable committed offset after 60 s: %v (code %d)", err, code)
		}
		time.Sleep(100 * time.Millisecond) // poll pacing, not synchronisation
	}
}

// fetchOffset reads group's committed offset of partition 0 of topic with
// OffsetFetch, whichever version the client picks (one group, or v8's
// groups): the offset and the first error code, the group's or the
// partition's.
func fetchOffset(ctx context.Context, r kmsg.Requestor, group, topic string, stable bool) (int64, int16, error) {
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Group, of.RequireStable = group, stable
	ot := kmsg.NewOffsetFetchRequestTopic()
	ot.Topic, ot.Partitions = topic, []int32{0}
	of.Topics = append(of.Topics, ot)
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = group
	gt := kmsg.NewOffsetFetchRequestGroupTopic()
	gt.Topic, gt.Partitions = topic, []int32{0}
	g.Topics = append(g.Topics, gt)
	of.Groups = append(of.Groups, g)
	resp, err := of.RequestWith(ctx, r)
	if err != nil {
		return -1, 0, err
	}
	if resp.Version >= 8 {
		if len(resp.Groups) != 1 {
			return -1, 0, fmt.Errorf("%d groups answered", len(resp.Groups))
		}
		rg := resp.Groups[0]
		if rg.ErrorCode != 0 || len(rg.Topics) != 1 || len(rg.Topics[0].Partitions) != 1 {
			return -1, rg.ErrorCode, nil
		}
		p := rg.Topics[0].Partitions[0]
		return p.Offset, p.ErrorCode, nil
	}
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return -1, resp.ErrorCode, nil
	}
	p := resp.Topics[0].Partitions[0]
	return p.Offset, p.ErrorCode, nil
}
