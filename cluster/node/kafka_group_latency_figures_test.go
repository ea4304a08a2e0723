package node

import (
	"context"
	"encoding/binary"
	"flag"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A measurement, not a check: BENCHMARKS.md's end-to-end latency with a
// consumer group.
//
//	go test ./cluster/node -run TestKafkaGroupLatencyFigures -v -group-latency-figures
var groupLatencyFiguresFlag = flag.Bool("group-latency-figures", false,
	"TestKafkaGroupLatencyFigures: run the group consumer latency measurement")

// End-to-end latency (produce call to the record in a consumer's hands)
// through the Kafka port, for a franz-go group of three members sharing
// 12 partitions, against one consumer of the same 12 partitions assigned
// directly (no group), in the same run: 2,000 records/s for 10 s, acks =
// all, each record carrying its send time.
var fetchWait = 500 * time.Millisecond

func TestKafkaGroupLatencyFigures(t *testing.T) {
	if !*groupLatencyFiguresFlag {
		t.Skip("a measurement: run with -group-latency-figures")
	}
	n := runNode(t, t.TempDir(), withKafka)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	addrs := []string{n.KafkaAddr()}
	adm := kadm.NewClient(kafkaClient(t, addrs))
	for _, mode := range []string{"direct", "group"} {
		topic := "lat-" + mode
		kafkaCreate(t, ctx, adm, topic, 12, -1)
		var mu sync.Mutex
		var lat []time.Duration
		take := func(rs []*kgo.Record) {
			now := time.Now()
			mu.Lock()
			for _, r := range rs {
				if len(r.Value) >= 8 {
					lat = append(lat, now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(r.Value)))))
				}
			}
			mu.Unlock()
		}
		var consumers []*kgo.Client
		switch mode {
		case "direct":
			parts := map[string]map[int32]kgo.Offset{topic: {}}
			for p := int32(0); p < 12; p++ {
				parts[topic][p] = kgo.NewOffset().AtStart()
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumePartitions(parts), kgo.FetchMaxWait(fetchWait))
			if err != nil {
				t.Fatal(err)
			}
			consumers = append(consumers, cl)
		case "group":
			for i := 0; i < 3; i++ {
				cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumerGroup("lat"), kgo.ConsumeTopics(topic),
					kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(fetchWait),
					kgo.AutoCommitInterval(time.Second))
				if err != nil {
					t.Fatal(err)
				}
				consumers = append(consumers, cl)
			}
		}
		var wg sync.WaitGroup
		cctx, stop := context.WithCancel(ctx)
		for _, cl := range consumers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for cctx.Err() == nil {
					take(cl.PollFetches(cctx).Records())
				}
			}()
		}
		if mode == "group" {
			clusterWait(t, 60*time.Second, "3 members with 4 partitions each", func() bool {
				st, per, err := describeAssigned(ctx, adm, "lat")
				return err == nil && st == "Stable" && len(per) == 3
			})
		}
		prod, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
		if err != nil {
			t.Fatal(err)
		}
		const rate, seconds = 2000, 10
		// A warm-up second, not counted: the consumers' first fetches
		// (metadata, start offsets, fetch sessions) are not what is
		// measured.
		send := func(n int) {
			tick := time.NewTicker(time.Second / rate)
			defer tick.Stop()
			for i := 0; i < n; i++ {
				<-tick.C
				v := make([]byte, 100)
				binary.BigEndian.PutUint64(v, uint64(time.Now().UnixNano()))
				prod.Produce(ctx, &kgo.Record{Value: v}, func(_ *kgo.Record, err error) {
					if err != nil {
						t.Error(err)
					}
				})
			}
		}
		send(rate)
		clusterWait(t, 30*time.Second, "the warm-up records consumed", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(lat) >= rate
		})
		mu.Lock()
		lat = lat[:0]
		mu.Unlock()
		send(rate * seconds)
		prod.Flush(ctx)
		prod.Close()
		clusterWait(t, 30*time.Second, "every record consumed", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(lat) >= rate*seconds
		})
		stop()
		wg.Wait()
		for _, cl := range consumers {
			cl.Close()
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		q := func(f float64) time.Duration { return lat[int(f*float64(len(lat)-1))].Round(10 * time.Microsecond) }
		t.Logf("%s: %d records, end-to-end p50 %v, p99 %v, p99.9 %v, max %v", mode, len(lat), q(0.5), q(0.99), q(0.999), q(1))
	}
}
