package client_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/client/clienttest"
	"github.com/corestream/corestream/netio/wire"
)

// pauseNode makes node answer nothing from now on (a SIGSTOPped process
// keeps its sockets open) until the returned resume is called; moveTo,
// when set, moves partition t/0 to that node at the first request the
// paused node receives, as the cluster elects a new primary for a paused
// one.
func pauseNode(t *testing.T, fc *clienttest.Cluster, node, moveTo int32) (resume func()) {
	hold := make(chan struct{})
	var once sync.Once
	h := fc.AddFault(clienttest.Fault{Node: node, Hold: hold, Then: func(clienttest.Request) {
		if moveTo > 0 {
			once.Do(func() {
				if err := fc.MovePrimary("t", 0, moveTo); err != nil {
					t.Error(err)
				}
			})
		}
	}})
	var done sync.Once
	resume = func() {
		done.Do(func() {
			h.Remove()
			close(hold)
		})
	}
	t.Cleanup(resume)
	return resume
}

// A produce sent to a primary that then answers nothing (paused) while
// the cluster elects another: the connection's silence makes the client
// ask the other node, which routes the partition elsewhere at a newer
// generation, and the record is acknowledged there within the 2 s target
// instead of after the request timeout (30 s). With the check turned off
// it is still waiting when the target has passed.
func TestSilentPrimaryIsLeftForTheNewOne(t *testing.T) {
	for _, on := range []bool{true, false} {
		e := newEnv(t, 2, map[string]int32{"t": 2}, func(c *client.Config) { // partition i's primary is node i+1
			if !on {
				c.SilentNodeCheck = -1
			}
		})
		p := e.producer(client.ProducerConfig{Partitioner: client.ManualPartitioner(), Linger: -1})
		produceWithin(t, e.ctx, p, "t", 0, "before", resumeTarget)
		pauseNode(t, e.fc, 1, 2)
		ctx, cancel := context.WithTimeout(e.ctx, resumeTarget+time.Second)
		start := time.Now()
		_, err := p.Produce(ctx, client.Record{Topic: "t", Partition: 0, Value: []byte("during")})
		took := time.Since(start)
		cancel()
		switch {
		case on && err != nil:
			t.Fatalf("with the check: %v after %v", err, took)
		case on && took > resumeTarget:
			t.Fatalf("with the check: acknowledged after %v, over the %v target", took, resumeTarget)
		case !on && !errors.Is(err, context.DeadlineExceeded):
			t.Fatalf("without the check: %v after %v, want the wait to outlast the target", err, took)
		}
		if on {
			if node, _, err := e.fc.Primary("t", 0); err != nil || node != 2 {
				t.Fatalf("t/0's primary is %d (%v), want 2", node, err)
			}
			t.Logf("acknowledged by the new primary %v after the old one went silent", took.Round(time.Millisecond))
		}
	}
}

// A primary that is slow but still leads its partitions (an fsync that
// takes long): the check asks, finds no newer primary, and keeps the
// connection; the answer arrives on it when the node answers.
func TestSlowPrimaryKeepsItsConnection(t *testing.T) {
	e := newEnv(t, 2, map[string]int32{"t": 2})
	p := e.producer(client.ProducerConfig{Partitioner: client.ManualPartitioner(), Linger: -1})
	produceWithin(t, e.ctx, p, "t", 0, "before", resumeTarget)
	resume := pauseNode(t, e.fc, 1, 0)
	res := make(chan error, 1)
	go func() {
		_, err := p.Produce(e.ctx, client.Record{Topic: "t", Partition: 0, Value: []byte("slow")})
		res <- err
	}()
	// Wait until the check has run at least twice (each refresh asks node
	// 2 for metadata once node 1 does not answer within the hedge delay).
	deadline := time.Now().Add(10 * time.Second)
	asked := e.fc.Requests(2, wire.APIMetadata)
	for e.fc.Requests(2, wire.APIMetadata) < asked+2 {
		if time.Now().After(deadline) {
			t.Fatalf("node 2 was asked for metadata %d times in 10 s; the check did not run", e.fc.Requests(2, wire.APIMetadata)-asked)
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-res:
		t.Fatalf("the produce ended while its primary was slow: %v", err)
	default:
	}
	resume()
	if err := <-res; err != nil {
		t.Fatalf("the produce on the kept connection: %v", err)
	}
	// Sent once on the connection that was kept: a failed connection
	// would have had the producer send it again.
	if n := e.fc.Requests(1, wire.APIProduce); n != 2 {
		t.Fatalf("node 1 received %d produce requests, want 2 (the connection was dropped and the record resent)", n)
	}
}
