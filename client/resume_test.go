package client_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/client/clienttest"
	"github.com/corestream/corestream/netio/wire"
)

// How soon a producer must write once the route it waited for is there.
// The tests' backoffs are far longer (seconds), so that a producer that
// sleeps them out instead fails whatever the machine's load.
const (
	resumeAfterRouteMax = time.Second
	slowBackoff         = 3 * time.Second
)

// slowRetries makes every retry backoff slowBackoff (less up to a
// quarter of jitter).
func slowRetries(c *client.Config) {
	c.RetryBackoffMin, c.RetryBackoffMax = slowBackoff, slowBackoff
}

// A primary steps down with no successor known yet (NOT_PRIMARY without a
// hint, as during an election after a restart); the metadata shows the
// new primary a moment later. The producer must write to it within
// resumeAfterRouteMax of the election, not at the end of its backoff
// (before: it slept out the backoff, 2.25-3 s here; in the fault harness
// up to RetryBackoffMax, 1 s, after the election).
func TestProducerResumesWhenMetadataShowsNewPrimary(t *testing.T) {
	e := newEnv(t, 2, map[string]int32{"t": 1}, slowRetries) // partition 0's primary is node 1
	p := e.producer(client.ProducerConfig{Partitioner: client.ManualPartitioner(), Linger: -1})
	var elected atomic.Int64 // unix ns of the election
	var once sync.Once
	e.fc.AddFault(clienttest.Fault{Node: 1, APIs: []wire.APIKey{wire.APIProduce},
		Err: &wire.ErrorResponse{Err: wire.ErrNotPrimary, Message: "stepped down; election under way"},
		Then: func(clienttest.Request) {
			once.Do(func() {
				time.AfterFunc(200*time.Millisecond, func() {
					if err := e.fc.MovePrimary("t", 0, 2); err != nil {
						t.Error(err)
					}
					elected.Store(time.Now().UnixNano())
				})
			})
		}})
	if _, err := p.Produce(e.ctx, client.Record{Topic: "t", Partition: 0, Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	took := time.Since(time.Unix(0, elected.Load()))
	t.Logf("written %v after the election", took)
	if elected.Load() == 0 || took > resumeAfterRouteMax {
		t.Fatalf("written %v after the new primary was elected, want within %v", took, resumeAfterRouteMax)
	}
}

// A batch that already failed once (BUSY) meets NOT_PRIMARY with a hint
// to a newer generation: it follows the hint at once, as Kafka's producer
// skips its backoff for a new leader epoch. Before, a hint after the
// first failure was followed only after the backoff (2.25-3 s here).
func TestProducerFollowsNewerGenerationHintAtOnce(t *testing.T) {
	e := newEnv(t, 2, map[string]int32{"t": 1}, slowRetries)
	p := e.producer(client.ProducerConfig{Partitioner: client.ManualPartitioner(), Linger: -1})
	e.fc.AddFault(clienttest.Fault{Node: 1, APIs: []wire.APIKey{wire.APIProduce}, Times: 1,
		Err: &wire.ErrorResponse{Err: wire.ErrBusy, Message: "busy"},
		Then: func(clienttest.Request) {
			if err := e.fc.MovePrimary("t", 0, 2); err != nil { // node 1 now answers NOT_PRIMARY with a hint
				t.Error(err)
			}
		}})
	var hinted atomic.Int64 // unix ns of the answer with the hint
	e.fc.AddFault(clienttest.Fault{Node: 1, APIs: []wire.APIKey{wire.APIProduce},
		Then: func(clienttest.Request) { hinted.Store(time.Now().UnixNano()) }})
	if _, err := p.Produce(e.ctx, client.Record{Topic: "t", Partition: 0, Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	took := time.Since(time.Unix(0, hinted.Load()))
	t.Logf("written %v after the hint", took)
	if hinted.Load() == 0 || took > resumeAfterRouteMax {
		t.Fatalf("written %v after the hint to the new primary, want within %v", took, resumeAfterRouteMax)
	}
}

// The primary's node is down: its dials are refused and the reconnect
// backoff grows. When the node is back and the metadata shows it alive,
// the producer dials it at once instead of when the backoff ends (before:
// 2.25-3 s here; in the fault harness up to ReconnectBackoffMax, 1 s,
// after the restart).
func TestProducerDialsARestartedNodeAtOnce(t *testing.T) {
	var refused atomic.Int32
	var addr2 string
	e := newEnv(t, 3, map[string]int32{"t": 3}, func(c *client.Config) { // partition 1's primary is node 2; three nodes, so that the others' answers are trusted
		c.ReconnectBackoffMin, c.ReconnectBackoffMax = slowBackoff, slowBackoff
		c.RetryBackoffMin, c.RetryBackoffMax = 10*time.Millisecond, 100*time.Millisecond
		var d net.Dialer
		c.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
			cn, err := d.DialContext(ctx, network, addr)
			if err != nil && addr == addr2 {
				refused.Add(1)
			}
			return cn, err
		}
	})
	addr2 = e.fc.Addr(2)
	p := e.producer(client.ProducerConfig{Partitioner: client.ManualPartitioner(), Linger: -1})
	if _, err := p.Produce(e.ctx, client.Record{Topic: "t", Partition: 1, Value: []byte("before")}); err != nil {
		t.Fatal(err)
	}
	e.fc.StopNode(2)
	e.fc.DropConnections(2)
	done := make(chan error, 1)
	go func() {
		_, err := p.Produce(e.ctx, client.Record{Topic: "t", Partition: 1, Value: []byte("after")})
		done <- err
	}()
	waitFor(t, "a refused dial to node 2", func() bool { return refused.Load() > 0 })
	// The producer must have seen node 2 down in the metadata, as it
	// would during a real restart: two refreshes answered after the
	// refusal (the first may have been on its way before it), so that a
	// loaded machine cannot hide the down-then-up edge this test is about.
	metaRequests := func() int { return e.fc.Requests(1, wire.APIMetadata) + e.fc.Requests(3, wire.APIMetadata) }
	m0 := metaRequests()
	waitFor(t, "two metadata refreshes while node 2 is down", func() bool { return metaRequests() >= m0+2 })
	if err := e.fc.StartNode(2); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-e.ctx.Done():
		t.Fatal("the write did not finish")
	}
	took := time.Since(started)
	t.Logf("written %v after the node returned (%d refused dials)", took, refused.Load())
	if took > resumeAfterRouteMax {
		t.Fatalf("written %v after the node returned, want within %v", took, resumeAfterRouteMax)
	}
}
