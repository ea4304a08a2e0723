package node

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnProducer is a transactional franz-go producer of id.
func txnProducer(t *testing.T, addrs []string, id string) *kgo.Client {
	t.Helper()
	return kafkaClient(t, addrs, kgo.TransactionalID(id), kgo.TransactionTimeout(30*time.Second))
}

// txnProduce produces values to topic in one transaction and ends it
// with commit.
func txnProduce(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, commit bool, values ...string) {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", v, err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("end (commit %v): %v", commit, err)
	}
}

// readAll reads topic's single partition from the start to its high
// watermark (markers included, KeepControlRecords) and answers the data
// records' values in order.
func readAll(t *testing.T, ctx context.Context, addrs []string, topic string, committed bool) []string {
	t.Helper()
	return readParts(t, ctx, addrs, topic, 1, committed)[0]
}

// readParts is readAll of each of topic's parts partitions.
func readParts(t *testing.T, ctx context.Context, addrs []string, topic string, parts int32, committed bool) map[int32][]string {
	t.Helper()
	adm := kadm.NewClient(kafkaClient(t, addrs))
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end := map[int32]int64{}
	left := 0
	for p := range parts {
		o, _ := ends.Lookup(topic, p)
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		if end[p] = o.Offset; o.Offset > 0 {
			left++
		}
	}
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl := kafkaClient(t, addrs, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(iso), kgo.KeepControlRecords())
	defer cl.Close()
	out := map[int32][]string{}
	for left > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s (committed %v): %d partitions short of %v: %v", topic, committed, left, end, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				out[r.Partition] = append(out[r.Partition], string(r.Value))
			}
			if r.Offset == end[r.Partition]-1 {
				left--
			}
		})
	}
	return out
}

// Transactions through franz-go's unchanged transactional producer, on
// one node: a committed transaction is read by a read_committed
// consumer, an aborted one is not (read_uncommitted sees both, markers
// taking offsets); a second producer of the same transactional id fences
// the first (PRODUCER_FENCED); offsets committed in a transaction stay
// UNSTABLE_OFFSET_COMMIT to an OffsetFetch that requires stable offsets
// until the commit, then read as committed; DescribeTransactions and
// ListTransactions (kadm) show the coordinator's state. Then the node
// restarts with a transaction open: the new coordinator replays the
// transaction-state partition (the id keeps its producer id and epoch),
// and a new producer of the id aborts what the old one left open.
func TestKafkaTransactions(t *testing.T) {
	dir := t.TempDir()
	n := runNode(t, dir, withKafka)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	addrs := []string{n.KafkaAddr()}
	adm := kadm.NewClient(kafkaClient(t, addrs))
	kafkaCreate(t, ctx, adm, "tx", 1, -1)
	kafkaCreate(t, ctx, adm, "tx-in", 1, -1)

	a := txnProducer(t, addrs, "app-a")
	txnProduce(t, ctx, a, "tx", true, "c0", "c1")
	txnProduce(t, ctx, a, "tx", false, "x0", "x1")
	txnProduce(t, ctx, a, "tx", true, "c2")
	if got, want := readAll(t, ctx, addrs, "tx", true), []string{"c0", "c1", "c2"}; !slices.Equal(got, want) {
		t.Fatalf("read_committed %v, want %v", got, want)
	}
	if got, want := readAll(t, ctx, addrs, "tx", false), []string{"c0", "c1", "x0", "x1", "c2"}; !slices.Equal(got, want) {
		t.Fatalf("read_uncommitted %v, want %v", got, want)
	}
	// EndTxn answers once the end is decided; its markers follow. Five
	// records and three markers: each marker takes an offset.
	var end int64
	waitFor(t, 30*time.Second, "the last marker", func() bool {
		ends, err := adm.ListEndOffsets(ctx, "tx")
		if err != nil {
			t.Fatal(err)
		}
		o, _ := ends.Lookup("tx", 0)
		end = o.Offset
		return end >= 8
	})
	if end != 8 {
		t.Fatalf("end offset %d, want 8 (markers take an offset each)", end)
	}

	// Offsets in a transaction: staged, then committed by its marker.
	pid, epoch, err := a.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := a.ProduceSync(ctx, &kgo.Record{Topic: "tx", Value: []byte("c3")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	addOffs := kmsg.NewPtrAddOffsetsToTxnRequest()
	addOffs.TransactionalID, addOffs.ProducerID, addOffs.ProducerEpoch, addOffs.Group = "app-a", pid, epoch, "etl"
	if resp, err := addOffs.RequestWith(ctx, a); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("AddOffsetsToTxn: %v %+v", err, resp)
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch, commit.Generation = "app-a", "etl", pid, epoch, -1
	ct := kmsg.NewTxnOffsetCommitRequestTopic()
	ct.Topic = "tx-in"
	cp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset = 0, 42
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	if resp, err := commit.RequestWith(ctx, a); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("TxnOffsetCommit: %v %+v", err, resp)
	}
	fetchOffset := func() (int64, int16) {
		t.Helper()
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Version, req.Group, req.RequireStable = 7, "etl", true
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = "tx-in", []int32{0}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		if resp.ErrorCode != 0 {
			t.Fatalf("OffsetFetch: group-level error %d", resp.ErrorCode)
		}
		p := resp.Topics[0].Partitions[0]
		return p.Offset, p.ErrorCode
	}
	if _, code := fetchOffset(); code != kerr.UnstableOffsetCommit.Code {
		t.Fatalf("OffsetFetch of a staged offset: code %d, want UNSTABLE_OFFSET_COMMIT", code)
	}
	d, err := adm.DescribeTransactions(ctx, "app-a")
	if err != nil {
		t.Fatal(err)
	}
	if dt := d["app-a"]; dt.State != "Ongoing" || dt.ProducerID != pid || dt.ProducerEpoch != epoch || len(dt.Topics["tx"]) != 1 || len(dt.Topics["__consumer_offsets"]) != 1 {
		t.Fatalf("described %+v", dt)
	}
	if err := a.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the transaction's offset to be committed", func() bool {
		off, code := fetchOffset()
		return code == 0 && off == 42
	})

	// Fencing: a second producer of the id takes over.
	b := txnProducer(t, addrs, "app-a")
	txnProduce(t, ctx, b, "tx", true, "b0")
	if err := a.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	err = a.ProduceSync(ctx, &kgo.Record{Topic: "tx", Value: []byte("zombie")}).FirstErr()
	if err == nil {
		err = a.EndTransaction(ctx, kgo.TryCommit)
	}
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("the fenced producer's transaction: %v, want PRODUCER_FENCED", err)
	}
	listed, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ids := listed.TransactionalIDs(); !slices.Equal(ids, []string{"app-a"}) {
		t.Fatalf("listed %v", ids)
	}
	bPid, bEpoch, err := b.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if bPid != pid || bEpoch <= epoch {
		t.Fatalf("the new producer holds %d/%d, the fenced one held %d/%d", bPid, bEpoch, pid, epoch)
	}

	// A transaction left open across a restart of the node (its
	// coordinator): replayed, then aborted by the id's next producer.
	if err := b.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := b.ProduceSync(ctx, &kgo.Record{Topic: "tx", Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	n.stop(t)
	n = runNode(t, dir, withKafka)
	addrs = []string{n.KafkaAddr()}
	adm = kadm.NewClient(kafkaClient(t, addrs))
	var dt kadm.DescribedTransaction
	waitFor(t, 30*time.Second, "the coordinator to load after the restart", func() bool {
		d, err := adm.DescribeTransactions(ctx, "app-a")
		dt = d["app-a"]
		return err == nil && dt.Err == nil
	})
	if dt.State != "Ongoing" || dt.ProducerID != bPid || dt.ProducerEpoch != bEpoch {
		t.Fatalf("after the restart: %+v, want Ongoing at %d/%d", dt, bPid, bEpoch)
	}
	c := txnProducer(t, addrs, "app-a")
	txnProduce(t, ctx, c, "tx", true, "c4")
	want := []string{"c0", "c1", "c2", "c3", "b0", "c4"}
	if got := readAll(t, ctx, addrs, "tx", true); !slices.Equal(got, want) {
		t.Fatalf("read_committed after the restart %v, want %v", got, want)
	}
	cPid, cEpoch, err := c.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cPid != bPid || cEpoch <= bEpoch+1 { // the abort and the new producer each bump
		t.Fatalf("after the restart the id holds %d/%d, before %d/%d", cPid, cEpoch, bPid, bEpoch)
	}
	t.Logf("epochs: %d, %d, %d", epoch, bEpoch, cEpoch)
}

// Transactions on three nodes, the partitions' primaries spread over
// them: the coordinator writes the markers of partitions other nodes
// lead through the peer transport. Then the coordinator's node stops
// with a transaction open: the id's partition of __transactions fails
// over, the new coordinator replays it, and the id's next producer
// aborts what was left open, on every partition, and commits its own.
func TestKafkaTransactionsCluster(t *testing.T) {
	tc, kports := startKafkaCluster(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	adm := kadm.NewClient(kafkaClient(t, kports))
	kafkaCreateRetrying(t, ctx, adm, "tx3", 3, 3)
	leaders := map[int32]bool{}
	clusterWait(t, 30*time.Second, "a leader for every partition, on three nodes", func() bool {
		md, err := adm.Metadata(ctx, "tx3")
		if err != nil || len(md.Topics["tx3"].Partitions) != 3 {
			return false
		}
		clear(leaders)
		for _, p := range md.Topics["tx3"].Partitions {
			if p.Err != nil || p.Leader < 1 {
				return false
			}
			leaders[p.Leader] = true
		}
		return len(leaders) == 3
	})
	produce := func(cl *kgo.Client, commit bool, prefix string) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for p := range int32(3) {
			r := &kgo.Record{Topic: "tx3", Partition: p, Value: []byte(fmt.Sprintf("%s-%d", prefix, p))}
			if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce %s to %d: %v", prefix, p, err)
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatalf("end %s: %v", prefix, err)
		}
	}
	producer := func() *kgo.Client {
		return kafkaClient(t, kports, kgo.TransactionalID("app-3"), kgo.TransactionTimeout(30*time.Second),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	a := producer()
	produce(a, true, "c0")
	produce(a, false, "x0")
	produce(a, true, "c1")
	want := map[int32][]string{}
	for p := range int32(3) {
		want[p] = []string{fmt.Sprintf("c0-%d", p), fmt.Sprintf("c1-%d", p)}
	}
	if got := readParts(t, ctx, kports, "tx3", 3, true); !reflect.DeepEqual(got, want) {
		t.Fatalf("read_committed %v, want %v", got, want)
	}

	// The coordinator's node stops with a transaction open.
	if err := a.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		if err := a.ProduceSync(ctx, &kgo.Record{Topic: "tx3", Partition: p, Value: []byte("open")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	d, err := adm.DescribeTransactions(ctx, "app-3")
	if err != nil || d["app-3"].State != "Ongoing" {
		t.Fatalf("described %+v %v", d, err)
	}
	coord := d["app-3"].Coordinator
	pid, epoch := d["app-3"].ProducerID, d["app-3"].ProducerEpoch
	a.Close()
	tc.stopNode(int(coord - 1))
	var live []string
	for i, addr := range kports {
		if int32(i+1) != coord {
			live = append(live, addr)
		}
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		// A fresh client each time: one caches the coordinator it found,
		// the stopped node, until its retries run out.
		cl, err := kgo.NewClient(kgo.SeedBrokers(live...), kgo.RetryTimeout(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		d, err := kadm.NewClient(cl).DescribeTransactions(ctx, "app-3")
		cl.Close()
		dt := d["app-3"]
		if err == nil && dt.Err == nil && dt.Coordinator != coord && dt.ProducerID == pid && dt.ProducerEpoch == epoch {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no other node coordinates the transactional id after 60 s: %+v %v", dt, err)
		}
		time.Sleep(100 * time.Millisecond) // poll pacing, not synchronisation
	}
	b := kafkaClient(t, live, kgo.TransactionalID("app-3"), kgo.TransactionTimeout(30*time.Second),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce(b, true, "c2")
	for p := range int32(3) {
		want[p] = append(want[p], fmt.Sprintf("c2-%d", p))
	}
	if got := readParts(t, ctx, live, "tx3", 3, true); !reflect.DeepEqual(got, want) {
		t.Fatalf("read_committed after the coordinator's failover %v, want %v", got, want)
	}
}

// A transaction open past its timeout is aborted by its coordinator, on
// its own: its records never reach a read_committed reader, the id's
// epoch is bumped, and the producer that left it is fenced when it tries
// to commit.
func TestKafkaTransactionTimeout(t *testing.T) {
	n := runNode(t, t.TempDir(), withKafka)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	addrs := []string{n.KafkaAddr()}
	adm := kadm.NewClient(kafkaClient(t, addrs))
	kafkaCreate(t, ctx, adm, "txt", 1, -1)
	p := kafkaClient(t, addrs, kgo.TransactionalID("slow"), kgo.TransactionTimeout(time.Second))
	txnProduce(t, ctx, p, "txt", true, "kept")
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.ProduceSync(ctx, &kgo.Record{Topic: "txt", Value: []byte("late")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	_, epoch, err := p.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the coordinator to abort the timed-out transaction", func() bool {
		d, err := adm.DescribeTransactions(ctx, "slow")
		dt := d["slow"]
		return err == nil && dt.State == "CompleteAbort" && dt.ProducerEpoch == epoch+1
	})
	if got := readAll(t, ctx, addrs, "txt", true); !slices.Equal(got, []string{"kept"}) {
		t.Fatalf("read_committed %v, want [kept]", got)
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("commit of a timed-out transaction: %v, want PRODUCER_FENCED", err)
	}
}
