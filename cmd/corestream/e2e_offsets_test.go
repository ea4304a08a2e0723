package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestE2EKafkaOffsetsDense: through franz-go on Kafka's port, on 1 and on
// 3 nodes, an empty partition ends at offset 0 and a group over it lags
// 0; 10,000 records produced through five kills of the partition's
// primary are acknowledged at offsets 0..n-1 in send order and consumed
// at the same offsets, the partition then ends at n, and the native
// protocol shows the same records at the same offsets.
func TestE2EKafkaOffsetsDense(t *testing.T) {
	for _, nodes := range []int{1, 3} {
		t.Run(fmt.Sprintf("nodes=%d", nodes), func(t *testing.T) { kafkaOffsetsDense(t, nodes) })
	}
}

func kafkaOffsetsDense(t *testing.T, nodes int) {
	const topic, rounds, perRound, chunk = "dense", 5, 2000, 200
	c := startCluster(t, clusterOpts{nodes: nodes})
	var kaddrs []string
	for _, n := range c.plan.Nodes {
		kaddrs = append(kaddrs, n.KafkaAddr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	newClient := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(kaddrs...), kgo.RetryTimeout(90 * time.Second),
			kgo.FetchMaxWait(200 * time.Millisecond)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	adm := kadm.NewClient(newClient())
	leader := func() int32 {
		var lead int32
		waitUntil(t, clusterWaitTimeout, "a leader for partition 0", func() (bool, string) {
			md, err := adm.Metadata(ctx, topic)
			if err != nil {
				return false, err.Error()
			}
			ps := md.Topics[topic].Partitions
			if len(ps) != 1 || ps[0].Err != nil || ps[0].Leader < 1 {
				return false, fmt.Sprintf("partitions %v", ps)
			}
			lead = ps[0].Leader
			return true, ""
		})
		return lead
	}
	endOffset := func() int64 {
		var end int64
		waitUntil(t, clusterWaitTimeout, "the end offset of partition 0", func() (bool, string) {
			ends, err := adm.ListEndOffsets(ctx, topic)
			if err != nil {
				return false, err.Error()
			}
			o, ok := ends.Lookup(topic, 0)
			if !ok || o.Err != nil {
				return false, fmt.Sprintf("%v %v", ok, o.Err)
			}
			end = o.Offset
			return true, ""
		})
		return end
	}
	waitUntil(t, clusterWaitTimeout, "the topic created", func() (bool, string) {
		if res, err := adm.CreateTopic(ctx, 1, int16(nodes), nil, topic); err != nil && res.Err == nil {
			return false, err.Error()
		}
		return true, ""
	})
	leader()
	if end := endOffset(); end != 0 {
		t.Fatalf("an empty partition ends at offset %d, want 0", end)
	}
	// A group that committed the start of the empty partition lags 0.
	if _, err := adm.CommitOffsets(ctx, "dense-lag", kadm.OffsetsFromRecords(kgo.Record{Topic: topic, Partition: 0, Offset: -1})); err != nil {
		t.Fatalf("commit: %v", err)
	}
	lags, err := adm.Lag(ctx, "dense-lag")
	if err != nil {
		t.Fatalf("lag: %v", err)
	}
	if l, ok := lags["dense-lag"].Lag.Lookup(topic, 0); !ok || l.Err != nil || l.Lag != 0 || l.End.Offset != 0 {
		t.Fatalf("the group's lag over the empty partition: %+v (%v), want 0 with end 0", l, ok)
	}

	pr := newClient(kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	var values []string
	for round := range rounds {
		for i := 0; i < perRound; i += chunk {
			recs := make([]*kgo.Record, chunk)
			for j := range recs {
				recs[j] = &kgo.Record{Value: fmt.Appendf(nil, "r%d-%04d", round, i+j)}
			}
			res := pr.ProduceSync(ctx, recs...)
			if err := res.FirstErr(); err != nil {
				t.Fatalf("produce round %d at %d: %v", round, i, err)
			}
			for _, r := range res {
				if want := int64(len(values)); r.Record.Offset != want {
					t.Fatalf("record %s acknowledged at offset %d, want %d (dense from 0)", r.Record.Value, r.Record.Offset, want)
				}
				values = append(values, string(r.Record.Value))
			}
		}
		// A new primary (and with it a new term) before the next round.
		victim := leader()
		c.kill(victim)
		c.restart(victim)
		if nodes > 1 {
			c.waitFormed()
		}
	}
	if end := endOffset(); end != int64(len(values)) {
		t.Fatalf("the partition ends at offset %d after %d records, want %d", end, len(values), len(values))
	}
	cons := newClient(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	for got := 0; got < len(values); {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records", got, len(values))
		}
		for _, r := range fs.Records() {
			if r.Offset != int64(got) || string(r.Value) != values[got] {
				t.Fatalf("consumed %q at offset %d, want %q at %d", r.Value, r.Offset, values[got], got)
			}
			got++
		}
	}
	// The native protocol shows the same records at the same offsets.
	out := c.node(leader()).cliOK("", "consume", topic, "--partition", "0", "--json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(values) {
		t.Fatalf("the native consumer read %d records, want %d", len(lines), len(values))
	}
	for i, line := range lines {
		var rec struct {
			Offset int64  `json:"offset"`
			Value  string `json:"value"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.Offset != int64(i) || rec.Value != values[i] {
			t.Fatalf("native record %d: %q (%v), want %q at %d", i, line, err, values[i], i)
		}
	}
}
