package node

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/cluster/config"
)

// TestLargeBatchesWrittenFromTheReadBuffer: 64 KiB batches produced over
// shard-aware connections are written by the log straight from netio's
// read buffer (the connection retains it), and every record reads back
// as produced; over one connection per node, where half the partitions
// are served across shards and their batches copied, too.
func TestLargeBatchesWrittenFromTheReadBuffer(t *testing.T) {
	for _, single := range []bool{false, true} {
		t.Run(fmt.Sprintf("single-conn=%v", single), func(t *testing.T) {
			// Under never: under always the log copies (one fdatasync per
			// write would undo group commit).
			n := startNode(t, t.TempDir(), func(c *config.Config) { c.Storage.Fsync = "never" })
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cl, err := client.DialConfig(ctx, client.Config{Brokers: []string{n.ClientAddr()}, SingleConnPerNode: single})
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			const parts, perPart, valueBytes = 2, 300, 1 << 10
			if _, err := cl.CreateTopic(ctx, client.TopicSpec{Name: "big", Partitions: parts}); err != nil {
				t.Fatal(err)
			}
			p, err := cl.NewProducer(ctx, client.ProducerConfig{Partitioner: client.ManualPartitioner(),
				BatchBytesMax: 64 << 10, Linger: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close(ctx)
			value := func(part int32, i int) []byte {
				v := bytes.Repeat([]byte{byte('a' + i%26)}, valueBytes)
				copy(v, fmt.Sprintf("%d-%d-", part, i))
				return v
			}
			errs := make(chan error, parts*perPart)
			for i := 0; i < perPart; i++ {
				for part := int32(0); part < parts; part++ {
					rec := client.Record{Topic: "big", Partition: part, Value: value(part, i)}
					if err := p.ProduceAsync(ctx, rec, func(_ client.Produced, err error) { errs <- err }); err != nil {
						t.Fatal(err)
					}
				}
			}
			for i := 0; i < parts*perPart; i++ {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			if !single && n.server.Stats().Retained.Load() == 0 {
				t.Fatal("no produced batch was written from the read buffer")
			}
			cs, err := cl.NewConsumer(client.ConsumerConfig{})
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()
			if err := cs.Assign(ctx, "big", nil, client.StartEarliest); err != nil {
				t.Fatal(err)
			}
			next := make([]int, parts)
			for got := 0; got < parts*perPart; {
				recs, err := cs.Poll(ctx)
				if err != nil {
					t.Fatalf("after %d records: %v", got, err)
				}
				for _, r := range recs {
					i := next[r.Partition]
					if !bytes.Equal(r.Value, value(r.Partition, i)) {
						t.Fatalf("partition %d record %d reads back %q…", r.Partition, i, r.Value[:16])
					}
					next[r.Partition]++
				}
				got += len(recs)
			}
		})
	}
}
