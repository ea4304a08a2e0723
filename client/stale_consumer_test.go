package client_test

import (
	"testing"
	"time"

	"github.com/corestream/corestream/client"
)

// A consumer whose partition's primary is re-elected on the same node (a
// factor-1 partition after its node restarts: generation 1 -> 2) follows
// the STALE_GENERATION hint and keeps reading, with no error surfacing.
func TestConsumerFollowsNewGenerationOnSameNode(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 1})
	p := e.producer(clientProducerManual())
	e.produceN(p, "t", 0, 3)
	cs := e.consumer(client.ConsumerConfig{FetchMaxWait: 50 * time.Millisecond})
	if err := cs.Assign(e.ctx, "t", nil, client.StartEarliest); err != nil {
		t.Fatal(err)
	}
	got := 0
	for got < 3 {
		recs, err := cs.Poll(e.ctx)
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		got += len(recs)
	}
	if err := e.fc.BumpGeneration("t", 0); err != nil {
		t.Fatal(err)
	}
	e.produceN(p, "t", 0, 3)
	for got < 6 {
		recs, err := cs.Poll(e.ctx)
		if err != nil {
			t.Fatalf("poll after the new generation: %v", err)
		}
		got += len(recs)
	}
}
