package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/tools/localcluster/launch"
)

// mountSmallFS mounts a tmpfs of size bytes at a new directory, unmounted
// when the test ends (after its servers are killed: cleanups run last
// registered first, and the servers register theirs later). It needs
// root; the CI runs as root.
func mountSmallFS(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small file system needs root (the CI runs as root)")
	}
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v\n%s", dir, err, out)
		}
	})
	return dir
}

// rawBatch is one uncompressed batch of one record of value v.
func rawBatch(t *testing.T, v []byte) []byte {
	t.Helper()
	b, err := batch.NewBuilder(batch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.AppendKV(time.Now().UnixMilli(), nil, v); err != nil {
		t.Fatal(err)
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A node whose data directory fills, seen by a Kafka client: produces
// are refused with KAFKA_STORAGE_ERROR (the client's retriable error for
// a broker's disk) while the disk is full, the node stays up and serves
// reads of what it acknowledged, and writes resume once space is freed,
// with every acknowledged record readable, in order, after a kill -9 and
// a restart too (fsync always: an acknowledgement is a synced write).
func TestE2EDiskFullKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a file system")
	}
	dir := mountSmallFS(t, 48<<20)
	ballast := filepath.Join(dir, "ballast")
	if err := os.WriteFile(ballast, make([]byte, 16<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	addrs, err := launch.FreeAddrs("127.0.0.1", 1)
	if err != nil {
		t.Fatal(err)
	}
	opts := serverOpts{dir: filepath.Join(dir, "data"), kafkaAddr: addrs[0], shards: 1,
		config: "[storage]\nfsync = \"always\"\nsegment_bytes = 4194304\n"}
	s := startServer(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	newClient := func(o ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addrs[0]), kgo.FetchMaxWait(200 * time.Millisecond)}, o...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	raw := newClient()
	adm := kadm.NewClient(raw)
	waitUntil(t, clusterWaitTimeout, "the topic created", func() (bool, string) {
		res, err := adm.CreateTopic(ctx, 1, 1, nil, "full")
		if err == nil {
			err = res.Err
		}
		return err == nil || strings.Contains(fmt.Sprint(err), "TOPIC_ALREADY_EXISTS"), fmt.Sprint(err)
	})
	// Short delivery timeouts: a full disk answers each produce with a
	// retriable error, which the client would retry for its default 2
	// minutes.
	pr := newClient(kgo.DefaultProduceTopic("full"), kgo.RecordDeliveryTimeout(2*time.Second), kgo.ProducerLinger(0),
		kgo.ProducerBatchMaxBytes(256<<10))
	// Values that do not compress (the client compresses batches).
	rng := rand.New(rand.NewPCG(1, 2))
	value := func(i int) []byte {
		b := []byte(fmt.Sprintf("%08d-", i))
		for range 500 {
			b = binary.LittleEndian.AppendUint64(b, rng.Uint64())
		}
		return b
	}
	var acked []int
	var refusal error
	for i := 0; refusal == nil && i < 20_000; i++ {
		if err := pr.ProduceSync(ctx, &kgo.Record{Value: value(i)}).FirstErr(); err != nil {
			refusal = err
			break
		}
		acked = append(acked, i)
	}
	if refusal == nil {
		t.Fatalf("%d records of 4 KB fit on a 48 MiB file system with 16 MiB of ballast", len(acked))
	}
	// The client says only that its records timed out, retrying what it
	// was told: the broker's own answer, asked directly, is
	// KAFKA_STORAGE_ERROR with a message that says why.
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "full"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = rawBatch(t, value(-1))
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	got := resp.Topics[0].Partitions[0]
	if got.ErrorCode != kerr.KafkaStorageError.Code || got.ErrorMessage == nil || !strings.Contains(*got.ErrorMessage, "no space") {
		t.Fatalf("produce on a full disk: code %d (%v), message %v; want KAFKA_STORAGE_ERROR saying there is no space",
			got.ErrorCode, kerr.ErrorForCode(got.ErrorCode), got.ErrorMessage)
	}
	t.Logf("the disk filled after %d acknowledged records: the client saw %v, the broker answers %q", len(acked), refusal, *got.ErrorMessage)
	if logs := s.stderr.String(); !strings.Contains(logs, "no space left on the data directory") {
		t.Errorf("the node's log does not say the disk is full:\n%s", tail(logs, 4<<10))
	}
	// Still up, and what it acknowledged reads back while the disk is full.
	consume := func(want int) []string {
		t.Helper()
		c := newClient(kgo.ConsumeTopics("full"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		defer c.Close()
		var got []string
		pctx, pcancel := context.WithTimeout(ctx, 60*time.Second)
		defer pcancel()
		for len(got) < want && pctx.Err() == nil {
			c.PollFetches(pctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value[:8])) })
		}
		return got
	}
	// The acknowledged records are all there, in order, each once; a
	// record whose produce was refused or timed out may be there too
	// (Kafka's rule for an unacknowledged write), but only once.
	check := func(got []string, acked []int, when string) {
		t.Helper()
		seen := map[string]bool{}
		j := 0
		for _, v := range got {
			if seen[v] {
				t.Fatalf("%s: record %s read twice", when, v)
			}
			seen[v] = true
			if j < len(acked) && v == fmt.Sprintf("%08d", acked[j]) {
				j++
			}
		}
		if j < len(acked) {
			t.Fatalf("%s: acknowledged record %08d missing or out of order (%d read, %d acknowledged)", when, acked[j], len(got), len(acked))
		}
	}
	check(consume(len(acked)), acked, "while the disk is full")
	// Space returns: writes resume.
	if err := os.Remove(ballast); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	waitUntil(t, 30*time.Second, "produces to resume once space is freed", func() (bool, string) {
		i := len(acked) + 1_000_000
		if err := pr.ProduceSync(ctx, &kgo.Record{Value: value(i)}).FirstErr(); err != nil {
			return false, err.Error()
		}
		acked = append(acked, i)
		return true, ""
	})
	t.Logf("writes resumed %v after the space was freed", time.Since(resumed).Round(time.Millisecond))
	for i := range 20 {
		if err := pr.ProduceSync(ctx, &kgo.Record{Value: value(2_000_000 + i)}).FirstErr(); err != nil {
			t.Fatalf("produce after the space returned: %v", err)
		}
		acked = append(acked, 2_000_000+i)
	}
	// Every acknowledgement was a synced write: a kill -9 loses none.
	s.kill()
	s = s.restart()
	check(consume(len(acked)), acked, "after kill -9 and restart")
}
