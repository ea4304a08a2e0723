package client_test

import (
	"fmt"
	"testing"

	"github.com/corestream/corestream/client"
)

// Kafka's own test vectors for its murmur2 (UtilsTest.testMurmur2).
func TestMurmur2KafkaVectors(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want int32
	}{
		{"21", -973932308},
		{"foobar", -790332482},
		{"a-little-bit-long-string", -985981536},
		{"a-little-bit-longer-string", -1486304829},
		{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
		{"abc", 479470107},
		{"1", -1993445489},
		{"12", 126087238},
		{"123", -267702483},
		{"1234", -1614185708},
		{"12345", -1188365604},
	} {
		if got := client.Murmur2([]byte(tc.key)); got != tc.want {
			t.Errorf("Murmur2(%q) = %d, want %d", tc.key, got, tc.want)
		}
	}
}

func TestKafkaPartition(t *testing.T) {
	// (murmur2 & 0x7fffffff) mod n, computed by hand from the vectors
	// above: -973932308 & 0x7fffffff = 1173551340, and so on.
	for _, tc := range []struct {
		key  string
		n    int32
		want int32
	}{
		{"21", 7, 3},
		{"foobar", 3, 0},
		{"abc", 10, 7},
	} {
		if got := client.KafkaPartition([]byte(tc.key), tc.n); got != tc.want {
			t.Errorf("KafkaPartition(%q, %d) = %d, want %d", tc.key, tc.n, got, tc.want)
		}
	}
}

// Keyed records land where Kafka would put them; keyless ones spread
// over every partition batch by batch.
func TestPartitionersPlaceRecords(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 4})
	p := e.producer(client.ProducerConfig{BatchBytesMax: 200})
	for i := 0; i < 40; i++ {
		key := []byte(fmt.Sprint("key-", i))
		pr, err := p.Produce(e.ctx, client.Record{Topic: "t", Key: key, Value: key})
		if err != nil {
			t.Fatal(err)
		}
		if want := client.KafkaPartition(key, 4); pr.Partition != want {
			t.Fatalf("key %q went to partition %d, want %d", key, pr.Partition, want)
		}
	}
	counts := make([]int, 4)
	results := make(chan client.Produced, 400)
	for i := 0; i < 400; i++ {
		if err := p.ProduceAsync(e.ctx, client.Record{Topic: "t", Value: []byte("some value")}, func(pr client.Produced, err error) {
			if err != nil {
				t.Error(err)
			}
			results <- pr
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Flush(e.ctx); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 400; i++ {
		counts[(<-results).Partition]++
	}
	for part, n := range counts {
		if n == 0 {
			t.Fatalf("sticky round robin never used partition %d: %v", part, counts)
		}
	}
}

func TestRoundRobinAndManualPartitioners(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 3})
	rr := e.producer(client.ProducerConfig{Partitioner: client.PerRecordRoundRobinPartitioner(), Linger: -1})
	for i := 0; i < 6; i++ {
		pr, err := rr.Produce(e.ctx, client.Record{Topic: "t", Key: []byte("same")})
		if err != nil || pr.Partition != int32(i%3) {
			t.Fatalf("record %d: partition %d, %v", i, pr.Partition, err)
		}
	}
	man := e.producer(client.ProducerConfig{Partitioner: client.ManualPartitioner(), Linger: -1})
	pr, err := man.Produce(e.ctx, client.Record{Topic: "t", Partition: 2, Key: []byte("k")})
	if err != nil || pr.Partition != 2 {
		t.Fatalf("manual: %+v %v", pr, err)
	}
	if _, err := man.Produce(e.ctx, client.Record{Topic: "t", Partition: 3}); err == nil {
		t.Fatal("partition 3 of 3 accepted")
	}
}

// StickySpreadPartitioner: a short keyless input reaches every partition
// (its first n records one on each), a long one is placed in runs that
// grow to the byte bound and no further, keyed records go where the key
// hash puts them, and the runs take the partitions in turn.
func TestStickySpreadPartitioner(t *testing.T) {
	for _, tc := range []struct {
		parts, records, valueBytes int
		// perPartitionMin is the fewest records a partition may get.
		perPartitionMin int
	}{
		{6, 6, 10, 1},
		{6, 12, 10, 1},
		{6, 300, 10, 300 / 6 / 3},
		{3, 1000, 10, 1000 / 3 / 3},
		{6, 1, 10, 0},
	} {
		t.Run(fmt.Sprintf("%d_records_on_%d", tc.records, tc.parts), func(t *testing.T) {
			p := client.StickySpreadPartitioner(0)
			got := make([]int, tc.parts)
			value := make([]byte, tc.valueBytes)
			for range tc.records {
				part := p.Partition(client.Record{Value: value}, int32(tc.parts))
				if part < 0 || int(part) >= tc.parts {
					t.Fatalf("partition %d of %d", part, tc.parts)
				}
				got[part]++
			}
			for i, c := range got {
				if c < tc.perPartitionMin {
					t.Errorf("partition %d got %d of %d records, want at least %d (all: %v)", i, c, tc.records, tc.perPartitionMin, got)
				}
			}
		})
	}
	// Long runs: 1 KiB records under the default 16 KiB bound settle in
	// runs of 16 records, each on the partition after the last.
	p := client.StickySpreadPartitioner(0)
	value := make([]byte, 1024)
	var seq []int32
	for range 2000 {
		seq = append(seq, p.Partition(client.Record{Value: value}, 4))
	}
	var runs []int
	for i, n := 1, 1; i <= len(seq); i++ {
		if i < len(seq) && seq[i] == seq[i-1] {
			n++
			continue
		}
		if i < len(seq) && seq[i] != (seq[i-1]+1)%4 {
			t.Fatalf("record %d went to partition %d after a run on %d; want the next one", i, seq[i], seq[i-1])
		}
		runs = append(runs, n)
		n = 1
	}
	for _, r := range runs[len(runs)/2 : len(runs)-1] {
		if r != client.StickyRunBytesDefault/1024 {
			t.Fatalf("runs of 1 KiB records %v; want them to settle at %d", runs, client.StickyRunBytesDefault/1024)
		}
	}
	// Keyed records: the key hash, whatever the runs.
	for _, key := range []string{"a", "orders-17", ""} {
		if got, want := p.Partition(client.Record{Key: []byte(key)}, 7), client.KafkaPartition([]byte(key), 7); got != want {
			t.Errorf("key %q: partition %d, want %d", key, got, want)
		}
	}
}
