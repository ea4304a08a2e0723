package node

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/shard/partition"
)

// onShardReplica runs fn on the shard of node n's replica of topic/p and
// waits for it; the test fails when the node has no such replica.
func onShardReplica(t *testing.T, n *Node, topic string, p int32, fn func(r *partition.Replica)) {
	t.Helper()
	tp := n.view.Load().Topics[topic]
	if tp == nil {
		t.Fatalf("node %d knows no topic %s", n.self, topic)
	}
	key, i := shardKey(tp.ID, p), n.shardOf(tp.ID, p)
	ch := make(chan bool, 1)
	if err := n.group.Shard(i).Post(func() {
		r := n.hosts[i].Get(key)
		if r != nil {
			fn(r)
		}
		ch <- r != nil
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case found := <-ch:
		if !found {
			t.Fatalf("node %d has no replica of %s/%d", n.self, topic, p)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("shard %d did not run a posted function within 30 s", i)
	}
}

// The partition's side of transactions seen by franz-go's unchanged
// consumer: transactional batches of two producers (written as raw
// Produce requests, as a transactional producer sends them) around a
// plain record; while they are open, the last stable offset (ListOffsets
// read_committed) stays at the first one and a read_committed consumer
// reads nothing; then one aborts and one commits (markers written by the
// partition's primary, as the coordinator will) and the read_committed
// consumer gets the committed and plain records only, the
// read_uncommitted one all of them, in order. DescribeProducers (kadm)
// shows each producer with where its open transaction starts.
func TestKafkaReadCommitted(t *testing.T) {
	n := runNode(t, t.TempDir(), withKafka)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := kafkaClient(t, []string{n.KafkaAddr()})
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "txn"); err != nil {
		t.Fatal(err)
	}
	produce := func(pid int64, txn bool, values ...string) {
		t.Helper()
		opts := batch.Options{}
		if pid >= 0 {
			opts = batch.Options{Idempotent: true, Transactional: txn, ProducerID: pid}
		}
		b, err := batch.NewBuilder(opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range values {
			if err := b.AppendKV(time.Now().UnixMilli(), nil, []byte(v)); err != nil {
				t.Fatal(err)
			}
		}
		recs, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 10_000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "txn"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = recs
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		for {
			resp, err := req.RequestWith(ctx, cl)
			if err == nil && resp.Topics[0].Partitions[0].ErrorCode == 0 {
				return
			}
			if ctx.Err() != nil {
				t.Fatalf("produce %v: %v %+v", values, err, resp)
			}
			time.Sleep(20 * time.Millisecond) // the new partition's primary is elected: retry pacing
		}
	}
	produce(1000, true, "a0", "a1") // 0-1, aborted below
	produce(-1, false, "plain")     // 2
	produce(2000, true, "b0")       // 3, committed below
	stable := func() int64 {
		t.Helper()
		offs, err := adm.ListCommittedOffsets(ctx, "txn") // read_committed "latest": the LSO
		if err != nil {
			t.Fatal(err)
		}
		o, _ := offs.Lookup("txn", 0)
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		return o.Offset
	}
	if lso := stable(); lso != 0 {
		t.Fatalf("LSO %d with a transaction open from 0", lso)
	}
	// DescribeProducers (kadm, as kafka-transactions.sh asks): both
	// transactional producers with where their transaction starts.
	producers := func() string {
		t.Helper()
		ds, err := adm.DescribeProducers(ctx, kadm.TopicsSet{"txn": {0: {}}})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range ds.SortedProducers() {
			out = append(out, fmt.Sprintf("%d/%d seq %d txn %d", p.ProducerID, p.ProducerEpoch, p.LastSequence, p.CurrentTxnStartOffset))
		}
		if pe := ds.SortedPartitions(); len(pe) != 1 || pe[0].Err != nil {
			t.Fatalf("DescribeProducers: %+v", pe)
		}
		return fmt.Sprint(out)
	}
	if got, want := producers(), "[1000/0 seq 1 txn 0 2000/0 seq 0 txn 3]"; got != want {
		t.Fatalf("producers %s, want %s", got, want)
	}
	consume := func(iso kgo.IsolationLevel, want int) []string {
		t.Helper()
		c := kafkaClient(t, []string{n.KafkaAddr()}, kgo.ConsumeTopics("txn"), kgo.FetchIsolationLevel(iso),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		defer c.Close()
		var got []string
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		defer pcancel()
		for len(got) < want {
			fs := c.PollFetches(pctx)
			if pctx.Err() != nil {
				break
			}
			fs.EachRecord(func(r *kgo.Record) { got = append(got, fmt.Sprintf("%s@%d", r.Value, r.Offset)) })
		}
		return got
	}
	if got := consume(kgo.ReadCommitted(), 1); len(got) != 0 {
		t.Fatalf("read_committed below open transactions: %v", got)
	}
	marker := func(m batch.TxnMarker) {
		t.Helper()
		out := make(chan error, 1)
		onShardReplica(t, n.Node, "txn", 0, func(r *partition.Replica) {
			r.WriteTxnMarker(&partition.MarkerArgs{Generation: partition.GenerationUnknown, Marker: m},
				func(res partition.ProduceResult) { out <- res.Err })
		})
		select {
		case err := <-out:
			if err != nil {
				t.Fatal(err)
			}
		case <-ctx.Done():
			t.Fatal("marker not answered")
		}
	}
	marker(batch.TxnMarker{ProducerID: 1000})               // abort at 4
	marker(batch.TxnMarker{ProducerID: 2000, Commit: true}) // commit at 5
	if lso := stable(); lso != 6 {
		t.Fatalf("LSO %d with every transaction decided, want the high watermark 6", lso)
	}
	if got, want := producers(), "[1000/0 seq 1 txn -1 2000/0 seq 0 txn -1]"; got != want {
		t.Fatalf("producers after the markers %s, want %s", got, want)
	}
	if got, want := consume(kgo.ReadCommitted(), 2), []string{"plain@2", "b0@3"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed: %v, want %v", got, want)
	}
	if got, want := consume(kgo.ReadUncommitted(), 4), []string{"a0@0", "a1@1", "plain@2", "b0@3"}; !slices.Equal(got, want) {
		t.Fatalf("read_uncommitted: %v, want %v", got, want)
	}
}
