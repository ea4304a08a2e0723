package main

import (
	"context"
	"encoding/binary"
	"flag"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/tools/localcluster/launch"
)

// Run with:
//
//	go test ./cmd/corestream -run TestE2EFollowerReadFigures -v -follower-figures
var followerFiguresFlag = flag.Bool("follower-figures", false, "TestE2EFollowerReadFigures: run the follower-read measurement")

// TestE2EFollowerReadFigures measures follower reads against primary
// reads on 3 nodes in racks a, b and c with one partition of factor 3 and
// three consumers, one per rack: (1) the primary's CPU while the three read
// the whole log (64 MiB) from the start, and their time; (2) the produce-to-
// consume latency of tailing consumers while a producer writes one 1 KiB
// record every 2 ms. Each phase runs once with the consumers reading from
// the primary (no rack) and once with their racks (the two outside the
// primary's rack read from their followers). Figures only: it fails only
// when records are missing.
func TestE2EFollowerReadFigures(t *testing.T) {
	if !*followerFiguresFlag {
		t.Skip("a measurement: run with -follower-figures")
	}
	const (
		topic     = "fig"
		logRecs   = 64 << 10 // 64 MiB of 1 KiB records
		tailRecs  = 1500
		tailEvery = 2 * time.Millisecond
	)
	racks := []string{"a", "b", "c"}
	c := startCluster(t, clusterOpts{nodes: 3, heartbeatMs: 100, electionMs: 1000, fsync: "never", mutate: func(p *launch.Plan) {
		for i := range p.Nodes {
			p.Nodes[i].Rack = racks[i]
		}
	}})
	cl := c.dial(fastRetries)
	createTopic(t, cl, client.TopicSpec{Name: topic, Partitions: 1, ReplicationFactor: 3})
	c.waitInSync(1)
	primary := topicRoutes(t, cl, topic)[0].PrimaryID
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	pr, err := cl.NewProducer(ctx, client.ProducerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close(context.Background())
	value := func() []byte {
		v := make([]byte, 1024)
		binary.BigEndian.PutUint64(v, uint64(time.Now().UnixNano()))
		return v
	}
	for i := 0; i < logRecs; i++ {
		if err := pr.ProduceAsync(ctx, client.Record{Topic: topic, Value: value()}, func(client.Produced, error) {}); err != nil {
			t.Fatal(err)
		}
	}
	if err := pr.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	c.waitInSync(1)
	t.Logf("primary: node %d (rack %s); %d records of 1 KiB written", primary, racks[primary-1], logRecs)

	consumers := func(withRacks bool, start client.Start) []*client.Consumer {
		var out []*client.Consumer
		for _, r := range racks {
			cfg := client.ConsumerConfig{FetchMaxWait: 100 * time.Millisecond}
			if withRacks {
				cfg.Rack = r
			}
			cs, err := cl.NewConsumer(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := cs.Assign(ctx, topic, []int32{0}, start); err != nil {
				t.Fatal(err)
			}
			out = append(out, cs)
		}
		return out
	}
	for _, withRacks := range []bool{false, true} {
		mode := "primary reads"
		if withRacks {
			mode = "rack reads"
		}
		// (1) Three whole-log readers.
		css := consumers(withRacks, client.StartEarliest)
		before := readProcTimes(t, c.node(primary).cmd.Process.Pid)
		began := time.Now()
		var wg sync.WaitGroup
		walls := make([]time.Duration, len(css))
		for i, cs := range css {
			wg.Add(1)
			go func(i int, cs *client.Consumer) {
				defer wg.Done()
				for n := 0; n < logRecs; {
					recs, err := cs.Poll(ctx)
					if err != nil {
						t.Errorf("%s, consumer %d: %v", mode, i, err)
						return
					}
					n += len(recs)
				}
				walls[i] = time.Since(began)
			}(i, cs)
		}
		wg.Wait()
		cpu := float64(readProcTimes(t, c.node(primary).cmd.Process.Pid).cpuTicks-before.cpuTicks) / clockTicksPerSecond
		var from []int32
		for _, cs := range css {
			id, _ := cs.ReadReplica(topic, 0)
			from = append(from, id)
			cs.Close()
		}
		t.Logf("%s: 3 × 64 MiB read in %v / %v / %v; primary CPU %.2f s; read replicas %v (0: the primary)",
			mode, walls[0].Round(time.Millisecond), walls[1].Round(time.Millisecond), walls[2].Round(time.Millisecond), cpu, from)

		// (2) Tail latency.
		css = consumers(withRacks, client.StartLatest)
		lat := make([][]time.Duration, len(css))
		for i, cs := range css {
			wg.Add(1)
			go func(i int, cs *client.Consumer) {
				defer wg.Done()
				for len(lat[i]) < tailRecs {
					recs, err := cs.Poll(ctx)
					if err != nil {
						t.Errorf("%s tail, consumer %d: %v", mode, i, err)
						return
					}
					now := time.Now()
					for _, r := range recs {
						lat[i] = append(lat[i], now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(r.Value)))))
					}
				}
			}(i, cs)
		}
		time.Sleep(500 * time.Millisecond) // a measurement's warm-up, not a synchronisation: the consumers reach the end first
		tick := time.NewTicker(tailEvery)
		for i := 0; i < tailRecs; i++ {
			<-tick.C
			if err := pr.ProduceAsync(ctx, client.Record{Topic: topic, Value: value()}, func(client.Produced, error) {}); err != nil {
				t.Fatal(err)
			}
		}
		tick.Stop()
		wg.Wait()
		for i, cs := range css {
			id, _ := cs.ReadReplica(topic, 0)
			t.Logf("%s tail, rack %s consumer (reading from %d): produce-to-consume p50 %v, p99 %v", mode, racks[i], id,
				quantile(lat[i], 0.5), quantile(lat[i], 0.99))
			cs.Close()
		}
	}
}

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(q*float64(len(s)-1))].Round(10 * time.Microsecond)
}
