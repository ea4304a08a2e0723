package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Kafka fetch answers send records from the segment files with sendfile,
// and the control batches in the middle of a log (the no-op of the
// generation a restart starts) are left out by offset ranges: franz-go
// reads every record once, in order, with the log's offsets, and the
// Kafka listener's sendfile counter grows by at least the record bytes.
func TestKafkaFetchSendsFromFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const perRun = 50
	value := func(i int) []byte { return []byte(fmt.Sprintf("record %03d %0200d", i, i)) }
	produce := func(n *testNode, from int) {
		t.Helper()
		pr := kafkaClient(t, []string{n.KafkaAddr()}, kgo.DefaultProduceTopic("files"), kgo.ProducerLinger(0),
			kgo.ProducerBatchCompression(kgo.NoCompression())) // so the values are the bytes sent
		for i := from; i < from+perRun; i++ {
			if err := pr.ProduceSync(ctx, &kgo.Record{Value: value(i)}).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
		}
		pr.Close()
	}

	n := runNode(t, dir, withKafka)
	kafkaCreate(t, ctx, kadm.NewClient(kafkaClient(t, []string{n.KafkaAddr()})), "files", 1, 1)
	produce(n, 0)
	n.stop(t)
	// The restart's generation starts with its no-op, after the records.
	n = runNode(t, dir, withKafka)
	produce(n, perRun)

	sent0 := n.kafka.Stats().SendfileBytes.Load()
	cl := kafkaClient(t, []string{n.KafkaAddr()},
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"files": {0: kgo.NewOffset().AtStart()}}))
	recs := consumeN(t, ctx, cl, 2*perRun)
	bytes := 0
	for i, r := range recs {
		if string(r.Value) != string(value(i)) {
			t.Fatalf("record %d at offset %d is %q, want %q", i, r.Offset, r.Value, value(i))
		}
		// The two generations' no-ops take no offsets: the records are
		// at 0..2*perRun-1, and the span around the second no-op is cut
		// (it never reaches the consumer).
		if r.Offset != int64(i) {
			t.Fatalf("record %d at offset %d, want %d (dense, the no-ops take no offset)", i, r.Offset, i)
		}
		bytes += len(r.Value)
	}
	if sent := n.kafka.Stats().SendfileBytes.Load() - sent0; sent < uint64(bytes) {
		t.Fatalf("the Kafka listener sent %d bytes with sendfile for %d record bytes: the records were copied", sent, bytes)
	}
}
