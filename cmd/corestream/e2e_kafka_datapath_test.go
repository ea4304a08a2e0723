package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/tools/localcluster/launch"
)

// TestE2EKafkaLendAndMigrate: franz-go producers on the Kafka port of a
// `corestream serve` with two shards, each producing large batches (64
// KiB and more) to one partition of a topic whose partitions lie on both
// shards. A producer's connection accepted on the shard that does not
// own its partition moves to the one that does
// (corestream_client_connections_migrated_total{listener="kafka"}
// rises), the log writes batches from the connections' read buffers
// (corestream_client_batches_lent_total{listener="kafka"} rises), and a
// consumer reads back every record byte for byte, in order.
func TestE2EKafkaLendAndMigrate(t *testing.T) {
	addrs, err := launch.FreeAddrs("127.0.0.1", 2)
	if err != nil {
		t.Fatal(err)
	}
	kafka, httpAddr := addrs[0], addrs[1]
	// Lending is off under fsync = always (every write carries its own
	// sync there, so the log copies batches to share one).
	startServer(t, serverOpts{kafkaAddr: kafka, httpAddr: httpAddr, shards: 2, config: "[storage]\nfsync = \"interval\"\n"})
	metrics := func() string { return string(httpGet(t, "http://"+httpAddr+"/metrics")) }
	series := func(name string) float64 { return metricValue(metrics(), name+`{listener="kafka"}`) }

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	newClient := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(kafka)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	adm := kadm.NewClient(newClient())

	// A topic whose partitions lie on both shards (the owner is a hash
	// of the topic id and the partition: a new name until it does).
	const partitions = 4
	var topic string
	owners := make([]int, partitions)
	for i := 0; topic == ""; i++ {
		if i == 8 {
			t.Fatal("8 topics of 4 partitions each lay on one shard")
		}
		name := fmt.Sprintf("lend-%d", i)
		if _, err := adm.CreateTopic(ctx, partitions, 1, nil, name); err != nil {
			t.Fatal(err)
		}
		var id [16]byte
		waitUntil(t, 30*time.Second, "the topic's partitions led", func() (bool, string) {
			md, err := adm.Metadata(ctx, name)
			if err != nil {
				return false, err.Error()
			}
			td := md.Topics[name]
			for _, p := range td.Partitions {
				if p.Err != nil || p.Leader < 1 {
					return false, fmt.Sprintf("partition %d: leader %d, %v", p.Partition, p.Leader, p.Err)
				}
			}
			id = td.ID
			return len(td.Partitions) == partitions, ""
		})
		seen := map[int]bool{}
		for p := range owners {
			owners[p] = shard.ShardForPartition(id, uint32(p), 2)
			seen[owners[p]] = true
		}
		if len(seen) == 2 {
			topic = name
		}
	}
	t.Logf("topic %s: partition owners %v", topic, owners)

	// Records of 8 KiB in batches of up to 120 KiB: a produce request of
	// one partition's batch fits in half the 256 KiB read buffer.
	rng := rand.New(rand.NewPCG(1, 2))
	value := func(p, i int) []byte {
		v := make([]byte, 8<<10)
		for j := range v {
			v[j] = byte(rng.Uint32())
		}
		copy(v, fmt.Sprintf("p%d-r%06d", p, i))
		return v
	}
	want := make([][][]byte, partitions)
	produce := func(p, n int) {
		t.Helper()
		pr := newClient(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchMaxBytes(120<<10), kgo.ProducerLinger(20*time.Millisecond), kgo.ProducerBatchCompression(kgo.NoCompression()))
		for round := 0; round < n; round++ {
			var recs []*kgo.Record
			for k := 0; k < 14; k++ {
				v := value(p, len(want[p]))
				want[p] = append(want[p], v)
				recs = append(recs, &kgo.Record{Partition: int32(p), Value: v})
			}
			if err := pr.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatalf("partition %d: %v", p, err)
			}
		}
		pr.Close()
	}
	lent0, moved0 := series("corestream_client_batches_lent_total"), series("corestream_client_connections_migrated_total")
	if lent0 < 0 || moved0 < 0 {
		t.Fatalf("/metrics lacks the kafka listener's series:\n%s", metrics())
	}
	// One producer per partition, each on a connection of its own; the
	// kernel spreads their connections over the shards, so some start on
	// the shard that does not own their partition. Until one has moved
	// (at most 8 rounds of producers), another round.
	for round := 0; series("corestream_client_connections_migrated_total") == moved0; round++ {
		if round == 8 {
			t.Fatalf("no Kafka connection moved after %d producers; cross-shard calls %v", 8*partitions,
				series("corestream_client_requests_cross_shard_total"))
		}
		for p := 0; p < partitions; p++ {
			produce(p, 2*8) // 16 produce requests at least: past the streak of 8
		}
	}
	moved, lent := series("corestream_client_connections_migrated_total")-moved0, series("corestream_client_batches_lent_total")-lent0
	t.Logf("Kafka connections moved %v, batches lent %v, cross-shard calls %v", moved, lent,
		series("corestream_client_requests_cross_shard_total"))
	if lent <= 0 {
		t.Fatal("no batch was lent: every produced batch was copied")
	}

	// Every record reads back byte for byte, in order.
	cons := newClient(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	got := make([]int, partitions)
	total, read := 0, 0
	for _, w := range want {
		total += len(w)
	}
	for read < total {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", read, total)
		}
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		for _, r := range fs.Records() {
			p := int(r.Partition)
			i := got[p]
			if i >= len(want[p]) {
				t.Fatalf("partition %d: record %d beyond the %d produced", p, i, len(want[p]))
			}
			if int64(i) != r.Offset {
				t.Fatalf("partition %d: record %d at offset %d", p, i, r.Offset)
			}
			if !bytes.Equal(r.Value, want[p][i]) {
				t.Fatalf("partition %d offset %d: %d bytes read differ from the %d produced (read %.12q, produced %.12q)",
					p, r.Offset, len(r.Value), len(want[p][i]), r.Value, want[p][i])
			}
			got[p]++
			read++
		}
	}
}
