package node

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/shard/partition"
)

// replicaCleaning is node n's log of partition p of topic as the cleaner
// left it: its dirty ratio, sealed segment count and size.
func replicaCleaning(t *testing.T, n *Node, topic string, p int32) (dirty float64, segments int, size int64) {
	t.Helper()
	tp := n.view.Load().Topics[topic]
	if tp == nil {
		t.Fatalf("no topic %s", topic)
	}
	key, i := shardKey(tp.ID, p), n.shardOf(tp.ID, p)
	ch := make(chan struct{})
	if err := n.group.Shard(i).Post(func() {
		if r := n.hosts[i].Get(key); r != nil {
			dirty, segments, size = r.Log().DirtyRatio(), r.Log().SegmentCount()-1, r.Log().Size()
		}
		close(ch)
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("shard %d did not run a posted function within 30 s", i)
	}
	return dirty, segments, size
}

// A topic created through Kafka with cleanup.policy=compact is cleaned by
// the node: franz-go writes 100,000 records over 1,000 keys (and
// tombstones for 50 of them), the node's small segments are cleaned, and
// a consumer from the start reads the latest value of every key, at
// increasing offsets, the tombstoned keys gone, far fewer records than
// were written; kcat, when installed, reads the same.
func TestKafkaCompactedTopic(t *testing.T) {
	n := runNode(t, t.TempDir(), func(c *config.Config) {
		withKafka(c)
		compactConfig(c)
	})
	latest := compactedRun(t, []*Node{n.Node}, []string{n.KafkaAddr()}, 1)
	if kcat, err := exec.LookPath("kcat"); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, kcat, "-b", n.KafkaAddr(), "-C", "-t", "table", "-p", "0", "-o", "beginning",
			"-e", "-q", "-Z", "-f", "%o %k %s\n").CombinedOutput()
		if err != nil {
			t.Fatalf("kcat: %v\n%s", err, out)
		}
		got, last := map[string]string{}, int64(-1)
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			var off int64
			var k, v string
			if _, err := fmt.Sscanf(line, "%d %s %s", &off, &k, &v); err != nil {
				t.Fatalf("kcat line %q: %v", line, err)
			}
			if off <= last {
				t.Fatalf("kcat: offset %d after %d", off, last)
			}
			last = off
			if v == "NULL" {
				delete(got, k)
			} else {
				got[k] = v
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(latest) {
			t.Fatalf("kcat: latest values differ:\ngot  %v\nwant %v", got, latest)
		}
	} else {
		t.Log("kcat is not installed (Debian: apt-get install kcat): its read is skipped")
	}
	// The partition says it is compacted, with its dirty share (what the
	// console and the HTTP API show).
	d, err := await(func(done func(service.PartitionDetail, error)) {
		service.Service(n.svc).DescribePartition(nil, service.PartitionRef{Topic: "table", Generation: service.GenerationUnknown}, done)
	})
	if err != nil || !d.Compacted || d.DirtyRatio < 0 || d.DirtyRatio > 1 {
		t.Errorf("describe the compacted partition: compacted %v, dirty ratio %v, %v", d.Compacted, d.DirtyRatio, err)
	}
	fams := scrape(t, n.Node)
	for _, name := range []string{"corestream_cleaner_read_bytes_total", "corestream_cleaner_reclaimed_bytes_total",
		"corestream_cleaner_removed_records_total", "corestream_cleaner_segments_rewritten_total"} {
		if f := fams[name]; f == nil || f.Metric[0].GetCounter().GetValue() <= 0 {
			t.Errorf("/metrics %s: %v, want a positive count after cleaning", name, f)
		}
	}
	if f := fams["corestream_cleaner_last_clean_timestamp_seconds"]; f == nil || f.Metric[0].GetGauge().GetValue() < float64(time.Now().Add(-time.Hour).Unix()) {
		t.Errorf("/metrics last clean time: %v", f)
	}
}

// On three nodes each replica cleans on its own schedule; once all have,
// every replica's log holds the same latest value of every key (read on
// its shard), and a consumer reads them from the primary. (Both tests
// read with franz-go and with the native SDK.)
func TestKafkaCompactedTopicThreeNodes(t *testing.T) {
	tc, kports := startKafkaCluster(t, compactConfig)
	compactedRun(t, tc.nodes, kports, 3)
}

// compactConfig makes segments small and the cleaner quick.
func compactConfig(c *config.Config) {
	c.Storage.SegmentBytes = 1 << 20
	c.Storage.CleanerIntervalMs = 50
}

// replicaLatest reads node n's log of partition p of topic from its start
// up to its commit on the replica's shard and returns the last value of
// every key (tombstones delete) and the records read.
func replicaLatest(t *testing.T, n *Node, topic string, p int32) (latest map[string]string, count int, hw int64) {
	t.Helper()
	out := map[string]string{}
	var rerr error
	onShardReplica(t, n, topic, p, func(r *partition.Replica) {
		l := r.Log()
		hw = r.HighWatermark()
		for off := l.LogStartOffset(); off < r.CommitEnd(); {
			spans, err := l.Read(off, 1<<20, r.CommitEnd()-1)
			if err != nil || len(spans) == 0 {
				rerr = fmt.Errorf("read at %d: %v (%d spans)", off, err, len(spans))
				return
			}
			for _, sp := range spans {
				b, err := sp.AppendTo(nil)
				if err != nil {
					rerr = err
					return
				}
				for len(b) > 0 {
					h, err := batch.ReadHeader(b)
					if err != nil {
						rerr = err
						return
					}
					var it batch.Records
					if err := it.Reset(b[:h.Size()]); err != nil {
						rerr = err
						return
					}
					for !h.IsControl() && it.Next() {
						rec := it.Record()
						count++
						if rec.Value == nil {
							delete(out, string(rec.Key))
						} else {
							out[string(rec.Key)] = string(rec.Value)
						}
					}
					off += h.RaftWidth()
					b = b[h.Size():]
				}
			}
			segment.ReleaseSpans(spans)
		}
	})
	if rerr != nil {
		t.Fatalf("reading node %d's replica: %v", n.self, rerr)
	}
	return out, count, hw
}

// compactedRun creates a compacted topic of replication factor rf on the
// nodes (Kafka ports addrs), writes to it, waits for every replica to be
// cleaned and checks what they and a consumer read.
func compactedRun(t *testing.T, nodes []*Node, addrs []string, rf int16) (latest map[string]string) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cl := kafkaClient(t, addrs, kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	configs := map[string]*string{"cleanup.policy": kadm.StringPtr("compact"),
		"delete.retention.ms": kadm.StringPtr("1"), "min.cleanable.dirty.ratio": kadm.StringPtr("0.1")}
	for {
		res, err := adm.CreateTopic(ctx, 1, rf, configs, "table")
		if err == nil {
			err = res.Err
		}
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("create: %v (%s)", err, res.ErrMessage)
		}
		time.Sleep(50 * time.Millisecond) // retry pacing while the metadata primary is elected, not synchronisation
	}
	rc, err := adm.DescribeTopicConfigs(ctx, "table")
	if err != nil {
		t.Fatal(err)
	}
	cfgs := map[string]string{}
	for _, c := range rc[0].Configs {
		cfgs[c.Key] = c.MaybeValue()
	}
	if cfgs["cleanup.policy"] != "compact" || cfgs["delete.retention.ms"] != "1" || cfgs["min.cleanable.dirty.ratio"] != "0.1" ||
		cfgs["max.compaction.lag.ms"] != "9223372036854775807" {
		t.Fatalf("DescribeConfigs: %v", cfgs)
	}
	// A record without a key is refused, as Kafka refuses it on a
	// compacted topic (the cleaner could never supersede it), and nothing
	// of its batch is written: the log's first record below is the
	// first keyed one.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "table", Value: []byte("keyless")}).FirstErr(); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("keyless record on a compacted topic: %v, want INVALID_RECORD", err)
	}

	const keys, total, deleted = 1000, 100_000, 50
	pad := strings.Repeat("p", 100)
	latest = map[string]string{}
	var rs []*kgo.Record
	var written int64 // bytes of keys and values
	for i := range total {
		k := fmt.Sprint("k", i%keys)
		r := &kgo.Record{Topic: "table", Key: []byte(k), Value: []byte(fmt.Sprintf("%s-%d-%s", k, i, pad))}
		if i >= 2*keys && i < 3*keys && i%keys < deleted {
			r.Value = nil // k0..k49 are deleted early and never written again
		}
		if r.Value == nil || i%keys >= deleted || i < 2*keys {
			rs = append(rs, r)
			written += int64(len(r.Key) + len(r.Value))
			if r.Value == nil {
				delete(latest, k)
			} else {
				latest[k] = string(r.Value)
			}
		}
		if len(rs) == 1000 || i == total-1 {
			if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			if i < 1000 && rs[0].Offset != 0 {
				t.Fatalf("the first keyed record is at offset %d, want 0: the refused keyless batch took none", rs[0].Offset)
			}
			rs = rs[:0]
		}
	}
	ends, err := adm.ListEndOffsets(ctx, "table")
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup("table", 0)
	deadline := time.Now().Add(60 * time.Second)
	for i, n := range nodes {
		var got map[string]string
		var read int
		for {
			// Cleaned, and the replica's high watermark at the end (a
			// follower learns the commit a heartbeat later).
			dirty, segments, size := replicaCleaning(t, n, "table", 0)
			var hw int64
			got, read, hw = replicaLatest(t, n, "table", 0)
			if dirty == 0 && segments >= 3 && size < written/2 && hw == end.Offset {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d not cleaned within 60 s: dirty ratio %.2f, %d sealed segments, size %d for %d bytes of keys and values written, high watermark %d of %d",
					i+1, dirty, segments, size, written, hw, end.Offset)
			}
			select {
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(latest) {
			t.Fatalf("node %d's replica holds other latest values:\ngot  %v\nwant %v", i+1, got, latest)
		}
		t.Logf("node %d: %d records in the log of %d written", i+1, read, total)
	}

	consumer := kafkaClient(t, addrs, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		"table": {0: kgo.NewOffset().AtStart()}}))
	got := map[string]string{}
	read, last := 0, int64(-1)
	for last < end.Offset-1 {
		fs := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed up to %d of %d: %v", last, end.Offset, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("fetch %s/%d: %v", topic, p, err) })
		for _, r := range fs.Records() {
			if r.Offset <= last {
				t.Fatalf("offset %d after %d", r.Offset, last)
			}
			last = r.Offset
			read++
			if r.Value == nil {
				delete(got, string(r.Key))
			} else {
				got[string(r.Key)] = string(r.Value)
			}
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(latest) {
		t.Fatalf("latest values differ:\ngot  %v\nwant %v", got, latest)
	}
	if read > total/2 {
		t.Fatalf("read %d records of %d written: not compacted", read, total)
	}
	t.Logf("consumer: %d records written, %d read after cleaning, up to offset %d", total, read, last)

	// The native SDK reads the same.
	nc, err := client.Dial(ctx, nodes[0].ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cs, err := nc.NewConsumer(client.ConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if err := cs.Assign(ctx, "table", []int32{0}, client.StartEarliest); err != nil {
		t.Fatal(err)
	}
	got, last = map[string]string{}, -1
	for last < end.Offset-1 {
		recs, err := cs.Poll(ctx)
		if err != nil {
			t.Fatalf("native poll after offset %d: %v", last, err)
		}
		for _, r := range recs {
			if r.Offset <= last {
				t.Fatalf("native: offset %d after %d", r.Offset, last)
			}
			last = r.Offset
			if r.Value == nil {
				delete(got, string(r.Key))
			} else {
				got[string(r.Key)] = string(r.Value)
			}
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(latest) {
		t.Fatalf("native: latest values differ:\ngot  %v\nwant %v", got, latest)
	}
	return latest
}
