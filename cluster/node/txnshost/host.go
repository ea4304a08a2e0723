// Package txnshost runs a node's transaction coordinators
// (docs/design/transactions.md): one txns.Coordinator per partition of
// the internal topic __transactions that the node leads, each owned by
// the shard of its partition, ticked on that shard's timer wheel on the
// node's clock (transaction timeouts, markers to retry), its state the
// partition's log: each transition is produced there, at the generation
// the node was elected in, before it is applied and answered; a node
// that becomes a partition's primary replays the partition into a fresh
// coordinator and then finishes the transactions it finds prepared.
//
// It holds no pointer to the node: what it needs comes in as Deps and
// the service as Data, wired by the composition root (cluster/node).
// The service reaches it through its TxnCoordinators port.
package txnshost

import (
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"sync/atomic"
	"time"

	"github.com/corestream/corestream/cluster/clock"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/cluster/txns"
	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"
)

// Bounds of the coordinators and their log.
const (
	// txnsTick is how often each shard's coordinators look at the
	// routes, abort transactions past their timeout and retry markers.
	txnsTick = 100 * time.Millisecond
	// txnsLoadFetchBytesMax bounds one fetch of a replay.
	txnsLoadFetchBytesMax = 1 << 20
	// txnsCallTimeout bounds one produce a coordinator makes.
	txnsCallTimeout = 10 * time.Second
	// txnsLoadRetryWait is how long a load waits before it retries a
	// call the partition refused for now; txnsLoadAttemptsMax bounds
	// those retries (about 10 s), the next route refresh starts anew.
	txnsLoadRetryWait   = 50 * time.Millisecond
	txnsLoadAttemptsMax = 200
	// txnsMarkerRetryWait is how long a marker the partition refused
	// waits before it is written again (its primary moving, its replica
	// opening).
	txnsMarkerRetryWait = 100 * time.Millisecond
)

// loadKey is the key of the load marker a new coordinator writes before
// it replays its partition; replay skips it.
const loadKey = "load"

// PartitionOf is the partition of the internal topic that transactional
// id lives in: FNV-1a of the id, mod n. Never to change: an id moved to
// another partition would lose its state.
func PartitionOf(id string, n int) int32 {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int32(h.Sum32() % uint32(n))
}

// Data are the service calls the coordinators make (nodesvc.Service).
type Data interface {
	// ProduceInternal is Produce without its refusal of clients'
	// writes to the internal topics.
	ProduceInternal(from *shard.Shard, req *service.ProduceRequest, done func(service.ProduceResult, error))
	Fetch(from *shard.Shard, req *service.FetchRequest, done func(service.FetchResult, error))
	// TxnsRoutes are the internal topic's routes, nil while it does not
	// exist; an error while the node has not loaded the metadata.
	TxnsRoutes() ([]service.PartitionRoute, error)
	// CreateTxnsTopic asks the metadata primary's controller to create
	// the internal topic; done may run on any goroutine.
	CreateTxnsTopic(partitions int, done func(error))
}

// Deps are what the coordinators need of the node.
type Deps struct {
	Self int32
	// Partitions is the partition count this node creates the topic
	// with; the topic's own count rules after that.
	Partitions int
	// Config bounds each coordinator (its NewProducerID draws the
	// node's producer ids).
	Config txns.Config
	// MetaPrimary is the metadata group's primary (-1: none known).
	MetaPrimary func() int32
	// Ready is nil once the node has loaded the committed metadata.
	Ready func() error
	// AddrOf and KafkaAddrOf are a node's advertised addresses.
	AddrOf, KafkaAddrOf func(id int32) string
	// OwnerShard is the shard that owns partition p of the internal
	// topic (-1: not in the View).
	OwnerShard func(p int32) int
	// GroupsPartition is the partition of the groups' internal topic
	// that holds group (AddOffsetsToTxn adds it).
	GroupsPartition func(group string) (int32, error)
	// WriteMarker writes m to partition part at its primary and
	// answers on from once it is written (for a partition of the
	// groups' topic, once the group coordinator decided the offsets
	// too); an error is retried.
	WriteMarker func(from *shard.Shard, part txns.Partition, m batch.TxnMarker, done func(error))
	// Infof logs a coordinator's gain, load and loss of a partition.
	Infof func(msg string, args ...any)
	// Clock is the node's clock.
	Clock clock.Clock
}

// Host runs the coordinators of the __transactions partitions this
// node leads. It has no lock and no goroutine of its own: each
// coordinator belongs to the shard that owns its partition, the only
// goroutine that touches it; callers reach it by a message to that
// shard.
type Host struct {
	d     Deps
	group *shard.Group
	data  Data
	// shards are the per-shard halves, by shard id; shards[i] is
	// touched only on shard i.
	shards []*txnsShard
	// creating says a create of the topic is in flight; stopped that
	// Stop ran.
	creating, stopped atomic.Bool
}

// txnsShard is one shard's coordinators. REQUIRES: every method runs
// on sh.
type txnsShard struct {
	sh    *shard.Shard
	parts map[int32]*txnsPart
}

// txnsPart is one partition this node leads, with its coordinator.
type txnsPart struct {
	p, gen int32
	coord  *txns.Coordinator
	// loaded says the replay is done: the coordinator answers.
	loaded bool
	// gone says the node stopped leading p at gen: answers of calls
	// made before change nothing then.
	gone bool
	// finishing are the ids whose markers are being written.
	finishing map[string]bool
}

// New returns a host for the shards of g; Start runs it.
func New(d Deps, g *shard.Group) *Host {
	if d.Infof == nil {
		d.Infof = func(string, ...any) {}
	}
	h := &Host{d: d, group: g}
	for i := 0; i < g.Len(); i++ {
		h.shards = append(h.shards, &txnsShard{sh: g.Shard(i), parts: map[int32]*txnsPart{}})
	}
	return h
}

// Start wires the host to the service and arms each shard's tick.
func (h *Host) Start(data Data) {
	h.data = data
	for _, ts := range h.shards {
		_ = ts.sh.Post(func() { ts.sh.AfterFunc(txnsTick, func() { h.tick(ts) }) })
	}
}

// Stop ends the ticks and drops every coordinator. REQUIRES: not on a
// shard.
func (h *Host) Stop() {
	if h == nil || h.stopped.Swap(true) {
		return
	}
	for _, ts := range h.shards {
		_ = ts.sh.Do(func(*shard.Shard) {
			for _, pt := range ts.sorted() {
				pt.gone = true
				pt.coord.Reset()
			}
			ts.parts = map[int32]*txnsPart{}
		})
	}
}

func (ts *txnsShard) sorted() []*txnsPart {
	out := make([]*txnsPart, 0, len(ts.parts))
	for _, pt := range ts.parts {
		out = append(out, pt)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].p < out[j].p })
	return out
}

func (h *Host) nowMs() int64 { return h.d.Clock.Now().UnixMilli() }

// tick looks at the routes, aborts the transactions past their timeout
// and finishes prepared ones whose markers are not being written, then
// arms the next.
func (h *Host) tick(ts *txnsShard) {
	if h.stopped.Load() {
		return
	}
	h.refresh(ts)
	now := h.nowMs()
	for _, pt := range ts.sorted() {
		if !pt.loaded {
			continue
		}
		for _, id := range pt.coord.Expired(now) {
			tr, err := pt.coord.Abort(id, now)
			if err != nil {
				continue
			}
			h.d.Infof("transactions: aborting a transaction past its timeout", "transactional_id", id, "partition", pt.p)
			h.persist(ts, pt, tr, func(error) {})
		}
		for _, t := range pt.coord.Prepared() {
			h.finish(ts, pt, t.ID)
		}
	}
	ts.sh.AfterFunc(txnsTick, func() { h.tick(ts) })
}

// refresh reads the topic's routes: a partition this node now leads
// (or leads at a new generation) gets a new coordinator that loads its
// state; one it no longer leads drops its coordinator.
func (h *Host) refresh(ts *txnsShard) {
	routes, err := h.data.TxnsRoutes()
	if err != nil || h.stopped.Load() {
		return
	}
	led := map[int32]int32{}
	for _, r := range routes {
		if r.PrimaryID == h.d.Self && r.Generation > 0 && h.d.OwnerShard(r.Partition) == ts.sh.ID() {
			led[r.Partition] = r.Generation
		}
	}
	for _, pt := range ts.sorted() {
		if gen, ok := led[pt.p]; !ok || gen != pt.gen {
			delete(ts.parts, pt.p)
			pt.gone = true
			pt.coord.Reset()
			h.d.Infof("transactions: no longer coordinating", "partition", pt.p, "generation", pt.gen)
		}
	}
	for _, r := range routes {
		gen, ok := led[r.Partition]
		if !ok || ts.parts[r.Partition] != nil {
			continue
		}
		pt := &txnsPart{p: r.Partition, gen: gen, coord: txns.New(h.d.Config), finishing: map[string]bool{}}
		ts.parts[pt.p] = pt
		h.loadMarker(ts, pt, 0, h.d.Clock.Now())
	}
}

// loadMarker makes a load marker durable in pt's partition (every
// record an earlier coordinator answered lies below it), then replays
// the partition up to it.
func (h *Host) loadMarker(ts *txnsShard, pt *txnsPart, attempt int, start time.Time) {
	h.append(ts, pt, txns.Record{Key: []byte(loadKey), Value: []byte{1}}, func(marker int64, err error) {
		switch {
		case pt.gone:
		case err != nil:
			h.retryLoad(ts, pt, attempt, err, func() { h.loadMarker(ts, pt, attempt+1, start) })
		default:
			h.replay(ts, pt, txnsLoad{marker: marker, start: start})
		}
	})
}

// txnsLoad is how far a load's replay got.
type txnsLoad struct {
	next, marker int64
	attempt      int
	records      int
	start        time.Time
}

// replay reads pt's partition from ld.next into its coordinator, up to
// the load marker; then the coordinator serves and finishes what it
// found prepared.
func (h *Host) replay(ts *txnsShard, pt *txnsPart, ld txnsLoad) {
	if ld.next > ld.marker {
		pt.loaded = true
		h.d.Infof("transactions: coordinating", "partition", pt.p, "generation", pt.gen, "records", ld.records,
			"ids", len(pt.coord.IDs()), "load_ms", clock.Since(h.d.Clock, ld.start).Milliseconds())
		for _, t := range pt.coord.Prepared() {
			h.finish(ts, pt, t.ID)
		}
		return
	}
	h.fetch(ts, pt, ld.next, func(recs []txns.Record, next int64, err error) {
		if pt.gone {
			return
		}
		if err == nil && next <= ld.next {
			err = fmt.Errorf("txnshost: no record at offset %d below the load marker %d yet", ld.next, ld.marker)
		}
		if err != nil {
			h.retryLoad(ts, pt, ld.attempt, err, func() { ld.attempt++; h.replay(ts, pt, ld) })
			return
		}
		for _, r := range recs {
			if string(r.Key) == loadKey {
				continue
			}
			if err := pt.coord.Replay(r); err != nil {
				// A record this coordinator cannot read is not one it
				// wrote: serving without it could hand out an epoch
				// older than one answered.
				h.d.Infof("transactions: cannot load the partition", "partition", pt.p, "error", err)
				return
			}
		}
		ld.records += len(recs)
		ld.next = next
		h.replay(ts, pt, ld)
	})
}

// retryLoad runs again after txnsLoadRetryWait, unless pt is gone; after
// txnsLoadAttemptsMax attempts pt is forgotten, and the next refresh
// starts a new load if the node still leads it.
func (h *Host) retryLoad(ts *txnsShard, pt *txnsPart, attempt int, err error, again func()) {
	if attempt >= txnsLoadAttemptsMax {
		h.d.Infof("transactions: gave up loading the partition; the next refresh tries again", "partition", pt.p, "error", err)
		if ts.parts[pt.p] == pt {
			delete(ts.parts, pt.p)
		}
		pt.gone = true
		return
	}
	ts.sh.AfterFunc(txnsLoadRetryWait, func() {
		if !pt.gone && !h.stopped.Load() {
			again()
		}
	})
}

// persist writes tr's record, then applies it (or fails it) and calls
// done with the call's answer; a prepared transition's markers follow.
// REQUIRES: on ts.
func (h *Host) persist(ts *txnsShard, pt *txnsPart, tr *txns.Transition, done func(error)) {
	h.append(ts, pt, tr.Record(), func(_ int64, err error) {
		if err != nil || pt.gone {
			pt.coord.Fail(tr)
			if err == nil {
				err = service.Errorf(service.ErrNotCoordinator, "node %d stopped coordinating %s partition %d; find the coordinator again",
					h.d.Self, metadata.TransactionsTopic, pt.p)
			}
			done(err)
			return
		}
		pt.coord.Apply(tr)
		done(txnErr(tr.Answer))
		if tr.Next.State.Prepared() {
			h.finish(ts, pt, tr.Next.ID)
		}
	})
}

// finish writes the markers of id's prepared transaction to each of its
// partitions (a refused one is retried after txnsMarkerRetryWait), then
// completes it. At most one finish per id runs at a time.
func (h *Host) finish(ts *txnsShard, pt *txnsPart, id string) {
	t := pt.coord.Get(id)
	if t == nil || !t.State.Prepared() || pt.finishing[id] || pt.gone {
		return
	}
	pt.finishing[id] = true
	left := len(t.Partitions)
	complete := func() {
		if pt.gone {
			return
		}
		tr, err := pt.coord.Complete(id, h.nowMs())
		if err != nil {
			delete(pt.finishing, id)
			return // a pending change of the id: the next tick finishes it
		}
		h.persist(ts, pt, tr, func(error) { delete(pt.finishing, id) })
	}
	if left == 0 {
		complete()
		return
	}
	m := batch.TxnMarker{ProducerID: t.ProducerID, ProducerEpoch: t.Epoch, Commit: t.State == txns.PrepareCommit, CoordinatorEpoch: pt.gen}
	for _, part := range t.Partitions {
		var write func()
		write = func() {
			h.d.WriteMarker(ts.sh, part, m, func(err error) {
				if pt.gone {
					return
				}
				switch {
				case errors.Is(err, partition.ErrFencedProducerEpoch):
					// A newer epoch of the producer already wrote a
					// marker there: this transaction's end is decided.
					h.d.Infof("transactions: a marker was fenced by a newer epoch", "transactional_id", id, "topic", part.Topic, "partition", part.Partition)
					err = nil
				case errors.Is(err, service.ErrUnknownTopicOrPartition):
					// The topic was deleted: nothing is left to mark,
					// and retrying would hold the id's next transaction
					// forever.
					h.d.Infof("transactions: no marker for a deleted partition", "transactional_id", id, "topic", part.Topic, "partition", part.Partition)
					err = nil
				}
				if err != nil {
					ts.sh.AfterFunc(txnsMarkerRetryWait, func() {
						if !pt.gone && !h.stopped.Load() {
							write()
						}
					})
					return
				}
				if left--; left == 0 {
					complete()
				}
			})
		}
		write()
	}
}
