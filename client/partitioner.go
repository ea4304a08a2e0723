package client

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
)

// AnyPartition, returned by a Partitioner, lets the producer choose: it
// keeps adding to one partition's batch until that batch is sent, then
// moves to the next partition (a sticky round robin, like Kafka's sticky
// partitioner), which makes full batches even with many partitions.
const AnyPartition int32 = -1

// A Partitioner chooses the partition of a record. Partition is called
// once per record, from the goroutine calling Produce, and must be safe for
// concurrent use. It returns a partition in [0, partitions) or AnyPartition.
// The record is passed by value so that producing does not move it to the
// heap; the partitioner must not keep its slices.
type Partitioner interface {
	Partition(r Record, partitions int32) int32
}

// PartitionerFunc adapts a function to a Partitioner.
type PartitionerFunc func(r Record, partitions int32) int32

// Partition calls f.
func (f PartitionerFunc) Partition(r Record, partitions int32) int32 { return f(r, partitions) }

// KeyHashPartitioner is the default: records with a key go to
// murmur2(key) mod partitions, exactly as Kafka's default partitioner
// places them (same hash, seed and sign handling), so a key lands on the
// same partition index as it would in a Kafka topic with the same count.
// Records without a key (nil Key) use the sticky round robin of
// AnyPartition.
func KeyHashPartitioner() Partitioner { return keyHash{} }

type keyHash struct{}

// Partition implements KeyHashPartitioner.
func (keyHash) Partition(r Record, n int32) int32 {
	if r.Key == nil {
		return AnyPartition
	}
	return KafkaPartition(r.Key, n)
}

// KafkaPartition returns the partition Kafka's default partitioner gives
// key among n partitions: (murmur2(key) & 0x7fffffff) mod n.
// REQUIRES: n > 0.
func KafkaPartition(key []byte, n int32) int32 {
	return int32(uint32(Murmur2(key))&0x7fffffff) % n
}

// RoundRobinPartitioner spreads records over every partition in turn,
// batch by batch (sticky round robin), ignoring keys.
func RoundRobinPartitioner() Partitioner {
	return PartitionerFunc(func(Record, int32) int32 { return AnyPartition })
}

// PerRecordRoundRobinPartitioner sends each record to the next partition
// in turn. It makes smaller batches than RoundRobinPartitioner.
func PerRecordRoundRobinPartitioner() Partitioner {
	var next atomic.Uint32
	return PartitionerFunc(func(_ Record, n int32) int32 {
		return int32((next.Add(1) - 1) % uint32(n))
	})
}

// ManualPartitioner uses each record's Partition field as given. A value
// outside [0, partitions) fails the record with UNKNOWN_TOPIC_OR_PARTITION.
func ManualPartitioner() Partitioner {
	return PartitionerFunc(func(r Record, _ int32) int32 { return r.Partition })
}

// Murmur2 is the 32-bit MurmurHash2 variant Kafka uses for keys (seed
// 0x9747b28c, little-endian 4-byte blocks), returned as Kafka's signed int.
func Murmur2(data []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	n := len(data)
	h := seed ^ uint32(n)
	i := 0
	for ; i+4 <= n; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	switch n - i {
	case 3:
		h ^= uint32(data[i+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[i+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[i])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// StickyRunBytesDefault is the longest run of keyless records that
// StickySpreadPartitioner sends to one partition: Kafka's batch.size
// default, after which Kafka's uniform sticky partitioner moves on.
const StickyRunBytesDefault = 16 << 10

// StickySpreadPartitioner places keyed records as KeyHashPartitioner
// does, and keyless ones in runs, each run on one partition and the next
// run on the next partition in turn. Runs start at one record and double
// at each round of the partitions, up to runBytesMax bytes (of keys,
// values and headers; StickyRunBytesDefault when runBytesMax <= 0): a
// long input is sent in full batches per partition, as Kafka's uniform
// sticky partitioner sends it (KIP-794), while a short one still reaches
// every partition — the first records of n partitions go one to each,
// where a run of a whole batch would put a short input on one or two.
// The first partition is chosen at random. It is meant for one topic (the
// runs are shared by every topic it places records of) and is safe for
// concurrent use.
func StickySpreadPartitioner(runBytesMax int) Partitioner {
	if runBytesMax <= 0 {
		runBytesMax = StickyRunBytesDefault
	}
	return &stickySpread{runBytesMax: runBytesMax, part: rand.Int32N(1 << 30), runRecords: 1}
}

// stickySpread is StickySpreadPartitioner's state.
//
// mu guards every field but runBytesMax.
type stickySpread struct {
	runBytesMax int
	mu          sync.Mutex
	// part is the partition of the run in progress, modulo the count.
	part int32
	// runRecords is the length of this round's runs in records;
	// inRound the runs of this round started; run the records and
	// runBytes the bytes of the run in progress.
	// Invariant: 1 <= runRecords, 0 <= run < runRecords.
	runRecords, inRound, run, runBytes int
}

// Partition implements StickySpreadPartitioner.
func (s *stickySpread) Partition(r Record, n int32) int32 {
	if r.Key != nil {
		return KafkaPartition(r.Key, n)
	}
	size := len(r.Value)
	for _, h := range r.Headers {
		size += len(h.Key) + len(h.Value)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.part % n
	s.run++
	s.runBytes += size
	if s.run >= s.runRecords || s.runBytes >= s.runBytesMax {
		// The run ends: the next record starts one on the next partition,
		// and a round of n runs doubles the runs (until they reach the
		// byte bound, which then ends them).
		s.part = (s.part%n + 1) % n
		s.run, s.runBytes = 0, 0
		if s.inRound++; s.inRound >= int(n) {
			s.inRound = 0
			if s.runRecords < s.runBytesMax { // bounded: a run of empty records ends there
				s.runRecords *= 2
			}
		}
	}
	return p
}
