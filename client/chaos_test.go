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
	seed := chaosSeedFor(t)
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

// Produce while nodes hang and resume (SIGSTOP/SIGCONT), are cut off from
// their peers and healed, and primaries move, with short request and
// delivery timeouts so that sends are abandoned at their delivery timeout
// and connections failed by their deadlines. Records may fail (their
// outcome is then unknown), but nothing acknowledged is lost, duplicated
// or reordered: each partition's log holds every acknowledged record once,
// acknowledged records in the order produced, and no record twice.
func TestProducerChaosHangsAndCuts(t *testing.T) {
	seed := chaosSeedFor(t)
	const nodes, partitions, perPartition = 3, 3, 200
	e := newEnv(t, nodes, map[string]int32{"t": partitions}, func(c *client.Config) { c.RequestTimeout = 100 * time.Millisecond })
	rng := rand.New(rand.NewPCG(seed, 2))
	cfg := smallBatches(client.ProducerConfig{DeliveryTimeout: 400 * time.Millisecond})
	cfg.BatchBytesMax = 100
	p := e.producer(cfg)
	type outcome struct {
		acked  bool
		offset int64
	}
	results := make([][]outcome, partitions)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	faultsDone := make(chan struct{})
	go func() { // the fault schedule; one fault at a time, each undone
		defer close(faultsDone)
		for round := 0; ; round++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(20+rng.IntN(60)) * time.Millisecond):
			}
			n := int32(rng.IntN(nodes) + 1)
			part := int32(rng.IntN(partitions))
			switch rng.IntN(4) {
			case 0:
				e.fc.Hang(n)
				time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond) // the fault's length, not a synchronisation
				e.fc.Resume(n)
			case 1:
				e.fc.CutOff(n)
				e.fc.MovePrimary("t", part, n%nodes+1) // an election on the healthy side
				time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
				e.fc.Heal(n)
			case 2:
				e.fc.MovePrimary("t", part, n)
			default:
				e.fc.BumpGeneration("t", part)
			}
		}
	}()
	for part := int32(0); part < partitions; part++ {
		results[part] = make([]outcome, perPartition)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perPartition; i++ {
				rec := client.Record{Topic: "t", Partition: part, Value: []byte(fmt.Sprint(i))}
				err := p.ProduceAsync(e.ctx, rec, func(pr client.Produced, err error) {
					results[part][i] = outcome{acked: err == nil, offset: pr.Offset}
					if err != nil && !errorsIs(err, client.ErrDeliveryTimeout) {
						t.Errorf("%d/%d: %v", part, i, err)
					}
				})
				if err != nil {
					t.Error(err)
					return
				}
				if i%3 == 2 {
					time.Sleep(15 * time.Millisecond) // spread the records over the faults
				}
			}
		}()
	}
	wg.Wait()
	if err := p.Flush(e.ctx); err != nil {
		t.Fatal(err)
	}
	close(stop)
	<-faultsDone
	acked := 0
	for part := int32(0); part < partitions; part++ {
		vals := e.values("t", part)
		at := map[string]int{}
		for off, v := range vals {
			if _, dup := at[v]; dup {
				t.Fatalf("partition %d holds %q twice: %v", part, v, vals)
			}
			at[v] = off
		}
		last := -1
		for i, r := range results[part] {
			if !r.acked {
				continue
			}
			acked++
			off, ok := at[fmt.Sprint(i)]
			if !ok {
				t.Fatalf("partition %d lost acknowledged record %d", part, i)
			}
			if r.offset >= 0 && int64(off) != r.offset {
				t.Fatalf("partition %d record %d acknowledged at %d, stored at %d", part, i, r.offset, off)
			}
			if off <= last {
				t.Fatalf("partition %d: acknowledged record %d at offset %d, before an earlier one at %d", part, i, off, last)
			}
			last = off
		}
	}
	t.Logf("%d of %d records acknowledged", acked, partitions*perPartition)
}

// chaosSeedFor returns -chaos.seed, or a new seed when it is 0, logs it,
// and at the end of a failed test prints the command that replays it.
func chaosSeedFor(t *testing.T) uint64 {
	seed := *chaosSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("chaos seed %d", seed)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("replay with: go test ./client -run '%s$' -chaos.seed=%d", t.Name(), seed)
		}
	})
	return seed
}
