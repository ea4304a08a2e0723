package shard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cespare/xxhash/v2"
	"golang.org/x/sys/unix"
)

// Limits and defaults of a Group's configuration.
const (
	// ShardsMax is the most shards a group may have (config shard.count).
	ShardsMax = 256
	// InboxDepthDefault is the default Config.InboxDepth (shard.inbox_depth).
	InboxDepthDefault = 4096
	// InboxDepthMin and InboxDepthMax bound Config.InboxDepth.
	InboxDepthMin = 16
	InboxDepthMax = 1 << 20
	// CallsInFlightMaxDefault is the default Config.CallsInFlightMax.
	CallsInFlightMaxDefault = 1024
	// BatchMaxDefault is the default Config.BatchMax.
	BatchMaxDefault = 256
	// TickDefault is the default Config.Tick.
	TickDefault = time.Millisecond
)

// Config configures a Group. Zero fields take the documented defaults.
type Config struct {
	// Count is the number of shards, 1..ShardsMax. Required.
	Count int
	// PinCores pins shard i's thread to the i-th CPU (mod their number) of
	// the CPUs the process may run on when the group starts.
	PinCores bool
	// InboxDepth is how many messages each shard's inbox holds before Post
	// is refused with ErrInboxFull. Default InboxDepthDefault; rounded up to
	// a power of two.
	InboxDepth int
	// CallsInFlightMax is how many Calls one shard may have waiting for
	// replies; Call returns ErrCallsFull beyond it. Default 1024.
	CallsInFlightMax int
	// BatchMax is how many inbox messages a shard runs before it looks at
	// its timers, engine and descriptors again. Default 256. A round also
	// starts no message once its messages have run 1 ms (inboxBudgetNs).
	BatchMax int
	// Tick is the timer resolution. Default 1 ms.
	Tick time.Duration
	// SpinIdle is how long an idle shard polls its inboxes before it parks
	// in epoll_wait. Default 0 (park at once); see docs/design/threading.md
	// for when spinning pays on a machine with few cores.
	SpinIdle time.Duration
	// EngineFactory, when set, creates shard id's write Engine (a
	// segment.Engine, such as netio/uring's) on the shard's own locked and
	// pinned thread before the shard runs anything else, so the io_uring
	// engine can use IORING_SETUP_SINGLE_ISSUER and its io-wq workers
	// inherit the shard's CPU. To hand in engines created elsewhere, return
	// them from the factory. The code that owns the logs keeps the full
	// segment.Engine it creates here; the shard only drives it.
	EngineFactory func(id int) (Engine, error)
	// OnStart runs on each shard's thread after its engine exists and before
	// it runs any message.
	OnStart func(*Shard)
	// OnStop runs on each shard's thread after its last message, before its
	// engine is closed.
	OnStop func(*Shard)
	// Clock replaces the monotonic clock (tests). With a custom clock the
	// shard does not arm its timerfd: the test calls Shard.Wake after
	// moving the clock.
	Clock Clock
	// Logf receives rare operational errors (engine submit failures).
	Logf func(format string, args ...any)
}

func (c *Config) withDefaults() (Config, error) {
	out := *c
	if out.Count < 1 || out.Count > ShardsMax {
		return out, fmt.Errorf("shard: count %d is outside 1..%d", out.Count, ShardsMax)
	}
	if out.InboxDepth == 0 {
		out.InboxDepth = InboxDepthDefault
	}
	if out.InboxDepth < InboxDepthMin || out.InboxDepth > InboxDepthMax {
		return out, fmt.Errorf("shard: inbox depth %d is outside %d..%d", out.InboxDepth, InboxDepthMin, InboxDepthMax)
	}
	if out.CallsInFlightMax == 0 {
		out.CallsInFlightMax = CallsInFlightMaxDefault
	}
	if out.CallsInFlightMax < 1 || out.CallsInFlightMax > InboxDepthMax {
		return out, fmt.Errorf("shard: calls in flight %d is outside 1..%d", out.CallsInFlightMax, InboxDepthMax)
	}
	if out.BatchMax == 0 {
		out.BatchMax = BatchMaxDefault
	}
	if out.BatchMax < 1 {
		return out, fmt.Errorf("shard: batch max %d must be positive", out.BatchMax)
	}
	if out.Tick == 0 {
		out.Tick = TickDefault
	}
	if out.Tick < time.Microsecond {
		return out, fmt.Errorf("shard: tick %v is below 1µs", out.Tick)
	}
	if out.SpinIdle < 0 || out.SpinIdle > time.Millisecond {
		return out, fmt.Errorf("shard: spin idle %v is outside 0..1ms", out.SpinIdle)
	}
	if out.Clock == nil {
		out.Clock = monoClock{}
	}
	return out, nil
}

// Group is a node's set of shards. Create it with NewGroup, start it with
// Start, stop it with Stop.
type Group struct {
	cfg    Config
	shards []*Shard
	// stepped is set by StartStepped (stepped.go), before any shard
	// runs, and never changes: Do then runs the shard's rounds itself.
	stepped bool
}

// NewGroup validates cfg and creates the shards (their epoll sets, inboxes
// and wheels); no goroutine runs until Start.
func NewGroup(cfg Config) (*Group, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	g := &Group{cfg: c}
	var cpus []int
	if c.PinCores {
		if cpus, err = allowedCPUs(); err != nil {
			return nil, err
		}
	}
	for i := 0; i < c.Count; i++ {
		cpu := -1
		if len(cpus) > 0 {
			cpu = cpus[i%len(cpus)]
		}
		s, err := newShard(g, i, cpu)
		if err != nil {
			for _, s := range g.shards {
				s.poll.close()
			}
			return nil, err
		}
		g.shards = append(g.shards, s)
	}
	return g, nil
}

// allowedCPUs lists the CPUs the process may run on, in order.
func allowedCPUs() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("shard: sched_getaffinity: %w", err)
	}
	var cpus []int
	for i := 0; i < len(set)*64; i++ {
		if set.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	if len(cpus) == 0 {
		return nil, errors.New("shard: no CPU in the affinity mask")
	}
	return cpus, nil
}

// Len is the number of shards.
func (g *Group) Len() int { return len(g.shards) }

// Shard returns shard i. REQUIRES: 0 <= i < Len().
func (g *Group) Shard(i int) *Shard { return g.shards[i] }

// Start runs every shard on its own locked thread and waits until each has
// booted (created its engine, run OnStart). If one fails, the ones started
// are stopped and the first error is returned.
func (g *Group) Start() error {
	var first error
	for _, s := range g.shards {
		if !s.state.CompareAndSwap(stateNew, stateRunning) {
			return fmt.Errorf("shard %d: already started", s.id)
		}
		started := make(chan error, 1)
		go s.run(started)
		if err := <-started; err != nil {
			first = err
			break
		}
	}
	if first != nil {
		g.Stop()
		return first
	}
	return nil
}

// Stop asks every shard to stop and waits until all have exited. A stopping
// shard refuses new Posts (ErrStopped) but runs every message it accepted
// and waits for the replies to its own Calls (replies are never refused),
// so no accepted work is dropped and Stop ends once that work is done.
// Timers are abandoned. It returns the first shard error.
func (g *Group) Stop() error {
	for _, s := range g.shards {
		if s.state.CompareAndSwap(stateNew, stateStopped) {
			s.poll.close()
			close(s.done)
			continue
		}
		if s.state.CompareAndSwap(stateRunning, stateStopping) {
			s.Wake()
		}
	}
	var first error
	for _, s := range g.shards {
		<-s.done
		if s.err != nil && first == nil {
			first = s.err
		}
	}
	return first
}

// ShardFor maps a key to its owning shard, 0..Len()-1, with xxhash: the
// mapping is stable for a given shard count.
func (g *Group) ShardFor(key []byte) int { return ShardFor(key, len(g.shards)) }

// ShardFor maps key to a shard index in 0..n-1 (xxhash64 of key mod n).
// REQUIRES: n >= 1.
func ShardFor(key []byte, n int) int {
	return int(xxhash.Sum64(key) % uint64(n))
}

// PartitionKey is the ownership key of a partition: its topic id (the
// 16-byte UUID fixed at topic creation) followed by the partition index,
// big endian. Every package that places partitions on shards or picks a
// replication connection (hash(partition) mod K) must use this key.
func PartitionKey(topicID [16]byte, partition uint32) [20]byte {
	var k [20]byte
	copy(k[:16], topicID[:])
	binary.BigEndian.PutUint32(k[16:], partition)
	return k
}

// ShardForPartition is ShardFor(PartitionKey(topicID, partition), n).
func ShardForPartition(topicID [16]byte, partition uint32, n int) int {
	k := PartitionKey(topicID, partition)
	return ShardFor(k[:], n)
}
