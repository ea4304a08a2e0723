package node

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/corestream/corestream/cluster/config"
)

// withKafka gives a test node a Kafka listener on a free port.
func withKafka(c *config.Config) { c.Node.KafkaAddr = "127.0.0.1:0" }

// kafkaClient is a franz-go client of the given nodes' Kafka ports,
// closed at the end of the test.
func kafkaClient(t *testing.T, addrs []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(addrs...), kgo.RetryTimeout(20 * time.Second),
		kgo.FetchMaxWait(200 * time.Millisecond)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// kafkaCreate creates a topic through the Kafka port and fails the test
// on any error.
func kafkaCreate(t *testing.T, ctx context.Context, adm *kadm.Client, name string, parts int32, rf int16) {
	t.Helper()
	res, err := adm.CreateTopic(ctx, parts, rf, nil, name)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatalf("create %s: %v (%s)", name, err, res.ErrMessage)
	}
}

// consumeN reads n records from the client's assigned partitions.
func consumeN(t *testing.T, ctx context.Context, cl *kgo.Client, n int) []*kgo.Record {
	t.Helper()
	var out []*kgo.Record
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records: %v", len(out), n, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Logf("fetch %s/%d: %v", topic, p, err)
		})
		out = append(out, fs.Records()...)
	}
	return out
}

// A single node serves franz-go: create a topic, produce with every acks
// level and the idempotent producer, consume from the start and from the
// end; the metadata names this node as every partition's leader with our
// generation as the leader epoch and our topic id.
func TestKafkaProduceConsume(t *testing.T) {
	t.Parallel()
	n := runNode(t, t.TempDir(), withKafka)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	addr := n.KafkaAddr()
	adm := kadm.NewClient(kafkaClient(t, []string{addr}))
	kafkaCreate(t, ctx, adm, "k", 3, -1)

	md, err := adm.Metadata(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	td := md.Topics["k"]
	view := n.view.Load().Topics["k"]
	if td.Err != nil || len(td.Partitions) != 3 || td.ID != kadm.TopicID(view.ID) {
		t.Fatalf("metadata: %+v (our id %s)", td, view.ID)
	}
	for _, p := range td.Partitions {
		rt, _ := n.routes.Get(shardKey(view.ID, p.Partition))
		if p.Leader != 1 || p.LeaderEpoch != rt.Term || len(p.Replicas) != 1 || len(p.ISR) != 1 {
			t.Fatalf("partition %d: %+v, our route %+v", p.Partition, p, rt)
		}
	}
	if len(md.Brokers) != 1 || fmt.Sprintf("%s:%d", md.Brokers[0].Host, md.Brokers[0].Port) != addr {
		t.Fatalf("brokers %+v, want %s", md.Brokers, addr)
	}

	total := 0
	for _, tc := range []struct {
		name string
		opts []kgo.Opt
	}{
		{"idempotent", nil},
		{"acks=all", []kgo.Opt{kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.AllISRAcks())}},
		{"acks=1", []kgo.Opt{kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.LeaderAck())}},
		{"acks=0", []kgo.Opt{kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.NoAck())}},
	} {
		pr := kafkaClient(t, []string{addr}, append(tc.opts, kgo.DefaultProduceTopic("k"))...)
		for i := 0; i < 30; i++ {
			r := &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(tc.name + "-" + fmt.Sprint(i))}
			if err := pr.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("%s: produce %d: %v", tc.name, i, err)
			}
		}
		total += 30
	}

	// From the start: every record once, in order per partition, offsets
	// without gaps but for the generation's control batch.
	cons := kafkaClient(t, []string{addr}, kgo.ConsumeTopics("k"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	recs := consumeN(t, ctx, cons, total)
	seen := map[string]bool{}
	last := map[int32]int64{}
	for _, r := range recs {
		if seen[string(r.Value)] {
			t.Fatalf("record %q consumed twice", r.Value)
		}
		seen[string(r.Value)] = true
		if o, ok := last[r.Partition]; ok && r.Offset <= o {
			t.Fatalf("partition %d: offset %d after %d", r.Partition, r.Offset, o)
		}
		last[r.Partition] = r.Offset
	}
	if len(seen) != total {
		t.Fatalf("consumed %d distinct records, want %d", len(seen), total)
	}

	// From the end: only what is produced afterwards. The consumer finds
	// the end at its first fetch, which the test cannot see: it produces
	// until the consumer gets something, which must all be new.
	tail := kafkaClient(t, []string{addr}, kgo.ConsumeTopics("k"), kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()))
	pr := kafkaClient(t, []string{addr}, kgo.DefaultProduceTopic("k"))
	for i := 0; ; i++ {
		if err := pr.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint("after-", i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		pctx, pcancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fs := tail.PollFetches(pctx)
		pcancel()
		if ctx.Err() != nil {
			t.Fatal("the tail consumer got nothing")
		}
		if recs := fs.Records(); len(recs) > 0 {
			for _, r := range recs {
				if !strings.HasPrefix(string(r.Value), "after-") {
					t.Fatalf("a consumer from the end got %q, produced before it started", r.Value)
				}
			}
			break
		}
	}
}
