package client_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/client/clienttest"
	"github.com/corestream/corestream/netio/wire"
)

var chaosSeed = flag.Uint64("chaos.seed", 0, "seed of TestProducerChaos (0: from the clock)")

// Produce to several partitions while the cluster misbehaves at random:
// connections close before or after a produce is applied, BUSY answers,
// primaries move and generations change. Every partition must hold every
// record exactly once, in order, and a consumer must read them back. The
// fault schedule is drawn from a seeded generator; a failure prints the
// seed (-chaos.seed=N replays the schedule for the same request order).
func TestProducerChaos(t *testing.T) {
	seed := *chaosSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("chaos seed %d", seed)
	defer func() {
		if t.Failed() {
			t.Logf("replay with: go test ./client -run TestProducerChaos -chaos.seed=%d", seed)
		}
	}()
	const nodes, partitions, perPartition = 3, 4, 250
	e := newEnv(t, nodes, map[string]int32{"t": partitions})
	var mu sync.Mutex // guards rng: Match runs under the cluster lock, Then outside it
	rng := rand.New(rand.NewPCG(seed, 1))
	chance := func(pct int) bool {
		mu.Lock()
		defer mu.Unlock()
		return rng.IntN(100) < pct
	}
	produce := []wire.APIKey{wire.APIProduce}
	closedAfter := e.fc.AddFault(clienttest.Fault{APIs: produce, CloseAfter: true, Match: func(clienttest.Request) bool { return chance(3) }})
	e.fc.AddFault(clienttest.Fault{APIs: produce, Close: true, Match: func(clienttest.Request) bool { return chance(3) }})
	e.fc.AddFault(clienttest.Fault{APIs: produce, Err: clienttest.Busy(1), Match: func(clienttest.Request) bool { return chance(3) }})
	e.fc.AddFault(clienttest.Fault{APIs: produce, Match: func(clienttest.Request) bool { return chance(4) },
		Then: func(r clienttest.Request) {
			mu.Lock()
			move, to := rng.IntN(2) == 0, int32(rng.IntN(nodes)+1)
			mu.Unlock()
			if move {
				e.fc.MovePrimary(r.Topic, r.Partition, to)
			} else {
				e.fc.BumpGeneration(r.Topic, r.Partition)
			}
		}})
	cfg := smallBatches(client.ProducerConfig{})
	cfg.BatchBytesMax = 100 // about 4 records a batch: many requests, many faults
	p := e.producer(cfg)
	offsets := make([][]int64, partitions)
	var wg sync.WaitGroup
	for part := int32(0); part < partitions; part++ {
		offsets[part] = make([]int64, perPartition)
		wg.Add(1)
		go func() { // one goroutine per partition: records of a partition in order
			defer wg.Done()
			for i := 0; i < perPartition; i++ {
				rec := client.Record{Topic: "t", Partition: part, Value: []byte(fmt.Sprint(i))}
				err := p.ProduceAsync(e.ctx, rec, func(pr client.Produced, err error) {
					if err != nil {
						t.Errorf("partition %d record %d: %v", part, i, err)
					}
					offsets[part][i] = pr.Offset
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := p.Flush(e.ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d produce requests, %d answers lost after appending", e.fc.Requests(0, wire.APIProduce), closedAfter.Hits())
	e.fc.ClearFaults()
	if t.Failed() {
		return
	}
	for part := int32(0); part < partitions; part++ {
		e.wantExactlyOnce("t", part, perPartition, offsets[part])
	}
	// Read everything back while fetches misbehave the same ways. Small
	// fetches cut batches; Poll may report retriable partition errors.
	fetch := []wire.APIKey{wire.APIFetch}
	e.fc.AddFault(clienttest.Fault{APIs: fetch, Close: true, Match: func(clienttest.Request) bool { return chance(5) }})
	e.fc.AddFault(clienttest.Fault{APIs: fetch, Err: clienttest.Busy(1), Match: func(clienttest.Request) bool { return chance(5) }})
	e.fc.AddFault(clienttest.Fault{APIs: fetch, Match: func(clienttest.Request) bool { return chance(5) },
		Then: func(r clienttest.Request) {
			mu.Lock()
			to := int32(rng.IntN(nodes) + 1)
			mu.Unlock()
			e.fc.MovePrimary(r.Topic, r.Partition, to)
		}})
	cs := e.consumer(client.ConsumerConfig{FetchMaxBytes: 300, FetchMaxWait: 10 * time.Millisecond})
	if err := cs.Assign(e.ctx, "t", nil, client.StartEarliest); err != nil {
		t.Fatal(err)
	}
	seen := make([]int64, partitions)
	for got := 0; got < partitions*perPartition; {
		recs, err := cs.Poll(e.ctx)
		if err != nil {
			if wire.IsRetriable(err) {
				continue // reported, and retried by the fetcher
			}
			t.Fatalf("Poll after %d records: %v", got, err)
		}
		for _, r := range recs {
			if r.Offset != seen[r.Partition] || string(r.Value) != fmt.Sprint(r.Offset) {
				t.Fatalf("consumed %d/%d = %q, want offset %d", r.Partition, r.Offset, r.Value, seen[r.Partition])
			}
			seen[r.Partition]++
			got++
		}
	}
	t.Logf("%d fetch requests", e.fc.Requests(0, wire.APIFetch))
}
