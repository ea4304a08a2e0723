// Package groupshost runs a node's consumer-group coordinators
// (docs/design/groups.md): one groups.Coordinator per partition of the
// internal topic __groups that the node leads, each owned by the shard
// of its partition, ticked on that shard's timer wheel on the node's
// clock, its state the partition's log, written and read through the
// typed service (Data). It also serves the groups' lag (LagSeries,
// LagCollector), the HTTP API's view of them (the httpapi.GroupsSource
// methods) and the retention of __groups below its checkpoints (Scans).
//
// It holds no pointer to the node: what it needs of the node comes in
// as Deps and the service as Data, wired by the composition root
// (cluster/node). The service reaches it through its Coordinators port
// (nodesvc.Coordinators).
package groupshost

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"sync/atomic"
	"time"

	"github.com/corestream/corestream/cluster/clock"
	"github.com/corestream/corestream/cluster/groups"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/node/nodesvc"
	"github.com/corestream/corestream/cluster/routes"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"
)

// The coordinators of consumer groups (docs/design/groups.md). Group
// state lives in the internal topic __groups (metadata.GroupsTopic) of
// cluster.groups_partitions partitions; group g lives in partition
// hash(g) mod N, and that partition's primary coordinates it. This node
// runs one groups.Coordinator per partition it leads, on the shard that
// owns the partition's replica, whose log is the partition: each change
// is produced there with acks = quorum before it is answered, and a node
// that becomes a partition's primary replays the partition before it
// answers for its groups.

// Bounds of the coordinators and their log.
const (
	// groupsTick is how often each shard's coordinators expire sessions
	// and end rebalances that ran out of time (a member is removed at
	// most this late past its session timeout), and how often the shard
	// reads which of its partitions of the internal topic it leads.
	groupsTick = 100 * time.Millisecond
	// groupsLoadFetchBytesMax bounds one fetch of a replay.
	groupsLoadFetchBytesMax = 1 << 20
	// groupsCallTimeout bounds one produce or fetch a coordinator makes.
	groupsCallTimeout = 10 * time.Second
	// groupsLoadRetryWait is how long a load waits before it retries a
	// call the partition refused for now (its replica still opening).
	groupsLoadRetryWait = 50 * time.Millisecond
	// groupsLoadAttemptsMax bounds those retries (about 10 s of them);
	// the next route refresh starts a new load.
	groupsLoadAttemptsMax = 200
	// groupsTopicAskGap is the least time between two requests this
	// node sends the metadata primary to create the topic, however many
	// group requests arrive before it exists (their clients retry).
	groupsTopicAskGap = 250 * time.Millisecond
)

// groupsPartitionOf is the partition of the internal topic that group
// lives in: FNV-1a of the name, mod n. Never to change: a group moved to
// another partition would lose its state.
func groupsPartitionOf(group string, n int) int32 {
	h := fnv.New32a()
	h.Write([]byte(group))
	return int32(h.Sum32() % uint32(n))
}

// Data are the service calls the coordinators make (nodesvc.Service).
type Data interface {
	// ProduceInternal is Produce without its refusal of clients'
	// writes to the internal topics.
	ProduceInternal(from *shard.Shard, req *service.ProduceRequest, done func(service.ProduceResult, error))
	Fetch(from *shard.Shard, req *service.FetchRequest, done func(service.FetchResult, error))
	// GroupsRoutes are the internal topic's routes, nil while it does
	// not exist; an error while the node has not loaded the metadata.
	GroupsRoutes() ([]service.PartitionRoute, error)
	// CreateGroupsTopic asks the metadata primary's controller to
	// create the internal topic; done may run on any goroutine.
	CreateGroupsTopic(partitions int, done func(error))
	// DescribeGroup is the service's describe of a group, asked of the
	// shard of its coordinator (the HTTP API's group members).
	DescribeGroup(from *shard.Shard, group string, done func(service.GroupDescription, error))
}

// Deps are what the coordinators need of the node.
type Deps struct {
	Self int32
	// Partitions is cluster.groups_partitions, used when this node
	// creates the topic; the topic's own count rules after that.
	Partitions int
	Config     groups.Config
	// MetaPrimary is the metadata group's primary (-1: none known).
	MetaPrimary func() int32
	// AskCreate asks primary, the metadata primary and another node, to
	// create the topic (the only node that can propose it); nil on a
	// node without peers. Callable from any goroutine.
	AskCreate func(primary int32)
	// Ready is nil once the node has loaded the committed metadata
	// (else a service error saying why not): until then an unknown
	// topic may exist.
	Ready func() error
	// AddrOf and KafkaAddrOf are a node's advertised addresses.
	AddrOf, KafkaAddrOf func(id int32) string
	// OwnerShard is the shard that owns partition p of the internal
	// topic (-1: not in the View).
	OwnerShard func(p int32) int
	// Infof logs a coordinator's gain, load and loss of a partition.
	Infof func(msg string, args ...any)
	// Clock is the node's clock: the coordinators' ticks, the load's
	// timing and the records' timestamps read it.
	Clock clock.Clock
	// View is the published metadata.
	View func() *routes.View
	// Ends are the high watermarks of the partitions among keys as their
	// primaries have them, wherever they are, waited for within ctx; a
	// partition whose primary did not answer is left out. The lag is
	// the committed offsets against them.
	Ends func(ctx context.Context, keys []metadata.OffsetKey) map[metadata.OffsetKey]End
	// MetaState runs read on the metadata controller's shard with its
	// applied state (nil before the metadata group opens) and waits for
	// it within ctx: the named-consumer offsets committed before groups
	// moved to __groups.
	MetaState func(ctx context.Context, read func(st *metadata.State)) error
}

// Host runs the coordinators of the __groups partitions this node
// leads, and answers where the others are. It has no lock and no
// goroutine of its own: each coordinator belongs to the shard that owns
// its partition (groupsShard), which ticks it on its timer wheel and is
// the only goroutine that touches it; every caller reaches it by a
// message to that shard (Locate), as a replica is reached.
type Host struct {
	d Deps
	// group is the shards'; data the service, set by Start.
	group *shard.Group
	data  Data
	// shards are the per-shard halves, by shard id. The slice is fixed at
	// construction; shards[i] is touched only on shard i.
	shards []*groupsShard
	// creating says a create of the topic is in flight (any shard may
	// start one: an atomic, not a field of one shard); stopped that stop
	// ran, so that no tick arms again and no load retries.
	creating, stopped atomic.Bool
	// askedNs is when this node last asked the metadata primary to
	// create the topic (the clock's Unix nanoseconds; 0: never).
	askedNs atomic.Int64
}

// groupsShard is one shard's coordinators: the __groups partitions this
// node leads whose replica lives on the shard. REQUIRES: every method
// runs on sh.
type groupsShard struct {
	sh *shard.Shard
	// parts are the partitions led at the last look, by index.
	// Invariant: parts[p].gen is the generation it led p at.
	parts map[int32]*groupsPart
}

// groupsPart is one partition this node leads, with its coordinator.
// Touched only on its shard.
type groupsPart struct {
	p, gen int32
	coord  *groups.Coordinator
	log    *PartLog
	// loaded says the replay is done: the coordinator answers requests.
	loaded bool
	// gone says the node stopped leading p at gen (or the load gave
	// up): the load's answers change nothing then.
	gone bool
}

// New returns a host for the shards of g; Start runs it.
func New(d Deps, g *shard.Group) *Host {
	if d.Infof == nil {
		d.Infof = func(string, ...any) {}
	}
	h := &Host{d: d, group: g}
	for i := 0; i < g.Len(); i++ {
		h.shards = append(h.shards, &groupsShard{sh: g.Shard(i), parts: map[int32]*groupsPart{}})
	}
	return h
}

// Start wires the host to the service and arms each shard's look at the
// routes and tick of its coordinators, every groupsTick on the shard's
// timer wheel, until Stop.
func (h *Host) Start(data Data) {
	h.data = data
	for _, gs := range h.shards {
		_ = gs.sh.Post(func() { gs.sh.AfterFunc(groupsTick, func() { h.tick(gs) }) })
	}
}

// tick looks at the routes, then expires sessions and ends rebalances
// of gs's loaded coordinators on the node's clock, and arms the next.
func (h *Host) tick(gs *groupsShard) {
	if h.stopped.Load() {
		return
	}
	h.refresh(gs)
	now := h.d.Clock.Now()
	for _, pt := range gs.sorted() {
		if pt.loaded {
			pt.coord.Tick(now)
		}
	}
	gs.sh.AfterFunc(groupsTick, func() { h.tick(gs) })
}

// sorted are gs's parts by partition, so that a seed of the simulator
// replays whatever the map's order.
func (gs *groupsShard) sorted() []*groupsPart {
	out := make([]*groupsPart, 0, len(gs.parts))
	for _, pt := range gs.parts {
		out = append(out, pt)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].p < out[j].p })
	return out
}

// Stop ends the ticks and drops every coordinator on its shard (parked
// calls are answered; their connections are closing). A nil host has
// nothing to stop. REQUIRES: not on a shard (it waits for each).
func (h *Host) Stop() {
	if h == nil || h.stopped.Swap(true) {
		return
	}
	for _, gs := range h.shards {
		_ = gs.sh.Do(func(*shard.Shard) {
			for _, pt := range gs.sorted() {
				pt.gone = true
				pt.coord.Reset()
			}
			gs.parts = map[int32]*groupsPart{}
		})
	}
}

// refresh reads the topic's routes: a partition of gs this node now
// leads (or leads at a new generation) gets a new coordinator that loads
// its state; one it no longer leads drops its coordinator, whose members
// are told they are unknown and find the new coordinator. Routes that
// cannot be read (the metadata is not loaded) change nothing.
func (h *Host) refresh(gs *groupsShard) {
	routes, err := h.data.GroupsRoutes()
	if err != nil || h.stopped.Load() {
		return
	}
	led := map[int32]int32{}
	for _, r := range routes {
		if r.PrimaryID == h.d.Self && r.Generation > 0 && h.d.OwnerShard(r.Partition) == gs.sh.ID() {
			led[r.Partition] = r.Generation
		}
	}
	for _, pt := range gs.sorted() {
		if gen, ok := led[pt.p]; !ok || gen != pt.gen {
			delete(gs.parts, pt.p)
			pt.gone = true
			pt.coord.Reset()
			h.d.Infof("groups: no longer coordinating", "partition", pt.p, "generation", pt.gen)
		}
	}
	for _, r := range routes {
		gen, ok := led[r.Partition]
		if !ok || gs.parts[r.Partition] != nil {
			continue
		}
		pt := &groupsPart{p: r.Partition, gen: gen, log: &PartLog{data: h.data, sh: gs.sh, p: r.Partition, gen: gen, clock: h.d.Clock}}
		pt.coord = groups.NewLogged(h.d.Config, pt.log)
		gs.parts[pt.p] = pt
		h.loadMarker(gs, pt, 0, h.d.Clock.Now())
	}
}

// loadMarker makes a load marker durable in pt's partition (once it is,
// every record the last coordinator answered lies below it), then
// replays the partition up to it. Each step runs on gs as the log's
// answer; a step that finds pt gone stops.
func (h *Host) loadMarker(gs *groupsShard, pt *groupsPart, attempt int, start time.Time) {
	pt.log.append([]groups.Record{groups.LoadMarker()}, func(marker int64, err error) {
		switch {
		case pt.gone:
		case err != nil:
			h.retryLoad(gs, pt, attempt, err, func() { h.loadMarker(gs, pt, attempt+1, start) })
		default:
			h.replay(gs, pt, groupsLoad{marker: marker, start: start})
		}
	})
}

// groupsLoad is how far a load's replay got.
type groupsLoad struct {
	// next is the offset to read next, marker the load marker's.
	next, marker int64
	attempt      int
	records      int
	start        time.Time
}

// replay reads pt's partition from ld.next and replays it into pt's
// coordinator, up to the load marker; then the coordinator serves.
func (h *Host) replay(gs *groupsShard, pt *groupsPart, ld groupsLoad) {
	if ld.next > ld.marker {
		pt.coord.Loaded()
		pt.loaded = true
		h.d.Infof("groups: coordinating", "partition", pt.p, "generation", pt.gen, "records", ld.records,
			"load_ms", clock.Since(h.d.Clock, ld.start).Milliseconds())
		return
	}
	pt.log.Fetch(ld.next, func(recs []groups.Record, next int64, err error) {
		if pt.gone {
			return
		}
		if err == nil && next <= ld.next {
			err = fmt.Errorf("groupshost: no record at offset %d below the load marker %d yet", ld.next, ld.marker)
		}
		if err != nil {
			h.retryLoad(gs, pt, ld.attempt, err, func() { ld.attempt++; h.replay(gs, pt, ld) })
			return
		}
		now := h.d.Clock.Now()
		for _, r := range recs {
			if err := pt.coord.Replay(now, r); err != nil {
				// A record this coordinator cannot read is not one it
				// wrote: serving without it could answer a member
				// with state older than what it was told.
				h.d.Infof("groups: cannot load the partition", "partition", pt.p, "error", err)
				return
			}
		}
		ld.records += len(recs)
		ld.next = next
		h.replay(gs, pt, ld)
	})
}

// retryLoad runs again after groupsLoadRetryWait on gs's timer wheel,
// unless the partition is gone or the host stopped by then; after
// groupsLoadAttemptsMax attempts the part is forgotten instead, so that
// the next refresh starts a new load if the node still leads it.
func (h *Host) retryLoad(gs *groupsShard, pt *groupsPart, attempt int, err error, again func()) {
	if attempt >= groupsLoadAttemptsMax {
		h.d.Infof("groups: gave up loading the partition; the next refresh tries again", "partition", pt.p, "error", err)
		if gs.parts[pt.p] == pt {
			delete(gs.parts, pt.p)
		}
		pt.gone = true
		return
	}
	gs.sh.AfterFunc(groupsLoadRetryWait, func() {
		if !pt.gone && !h.stopped.Load() {
			again()
		}
	})
}

// coordinator is, on gs, the loaded coordinator of partition p (route
// r), else the error to answer for group: ErrCoordinatorLoading while it
// loads (a partition this node was just given starts loading now),
// ErrNotCoordinator (hint: the partition's primary), or
// ErrCoordinatorNotAvailable.
func (h *Host) coordinator(gs *groupsShard, p int32, r service.PartitionRoute, group string) (*groups.Coordinator, error) {
	pt := gs.parts[p]
	if pt == nil && r.PrimaryID == h.d.Self && r.Generation > 0 {
		h.refresh(gs) // the route says this node leads it: start the load at once rather than at the tick
		pt = gs.parts[p]
	}
	if pt != nil {
		if !pt.loaded {
			return nil, service.Errorf(service.ErrCoordinatorLoading,
				"node %d is loading the state of %s partition %d, which holds group %q; retry shortly", h.d.Self, metadata.GroupsTopic, p, group)
		}
		return pt.coord, nil
	}
	if r.PrimaryID <= 0 || r.PrimaryID == h.d.Self {
		return nil, service.Errorf(service.ErrCoordinatorNotAvailable,
			"%s partition %d, which holds group %q, has no primary now; retry shortly", metadata.GroupsTopic, p, group)
	}
	e := service.Errorf(service.ErrNotCoordinator, "node %d does not coordinate group %q: node %d, the primary of %s partition %d, does",
		h.d.Self, group, r.PrimaryID, metadata.GroupsTopic, p)
	e.Hint = &service.Hint{NodeID: r.PrimaryID, Generation: r.Generation, ClientAddr: h.d.AddrOf(r.PrimaryID)}
	return nil, e
}

// Locate implements nodesvc.Coordinators: the shard that owns group's
// coordinator, and the lookup to run there (coordinator); a call this
// node cannot serve (the topic does not exist yet, or its partition is
// not in the View) is answered err. Callable from any goroutine.
func (h *Host) Locate(group string) (*shard.Shard, func() (*groups.Coordinator, error), error) {
	routes, err := h.data.GroupsRoutes()
	if err == nil && routes == nil {
		err = h.needTopic(group)
	}
	if err != nil {
		return nil, nil, err
	}
	p := groupsPartitionOf(group, len(routes))
	i := h.d.OwnerShard(p)
	if i < 0 || i >= len(h.shards) {
		return nil, nil, service.Errorf(service.ErrCoordinatorNotAvailable, "%s partition %d, which holds group %q, is not in this node's metadata yet; retry shortly",
			metadata.GroupsTopic, p, group)
	}
	gs := h.shards[i]
	return gs.sh, func() (*groups.Coordinator, error) { return h.coordinator(gs, p, routes[p], group) }, nil
}

// Shards implements nodesvc.Coordinators.
func (h *Host) Shards() []*shard.Shard {
	out := make([]*shard.Shard, len(h.shards))
	for i, gs := range h.shards {
		out[i] = gs.sh
	}
	return out
}

// Loaded implements nodesvc.Coordinators. REQUIRES: on shard i.
func (h *Host) Loaded(i int) []*groups.Coordinator {
	var out []*groups.Coordinator
	for _, pt := range h.shards[i].sorted() {
		if pt.loaded {
			out = append(out, pt.coord)
		}
	}
	return out
}

// groupsAll runs read on every shard with its half of the host and
// calls done once with the answers, by shard id: on from, or (from nil)
// on the shard that answered last. A shard that cannot take the call
// answers R's zero value.
func groupsAll[R any](h *Host, from *shard.Shard, read func(gs *groupsShard) R, done func([]R)) {
	out := make([]R, len(h.shards))
	var left atomic.Int32 // answers may arrive on several shards when from is nil
	left.Store(int32(len(h.shards)))
	for i, gs := range h.shards {
		nodesvc.RunOn(from, gs.sh, nil, func(_ *shard.Shard, reply func(R, error)) { reply(read(gs), nil) }, func(v R, _ error) {
			out[i] = v
			if left.Add(-1) == 0 {
				done(out)
			}
		})
	}
}

// groupsAllWait is groupsAll for a caller that is not a shard (a scrape,
// the HTTP API): it waits for the answers within ctx. REQUIRES: not on a
// shard, and not a stepped group's (nothing would run the shards).
func groupsAllWait[R any](ctx context.Context, h *Host, read func(gs *groupsShard) R) ([]R, error) {
	ch := make(chan []R, 1) // buffered: a late answer never blocks its shard
	groupsAll(h, nil, read, func(out []R) { ch <- out })
	select {
	case out := <-ch:
		return out, nil
	case <-ctx.Done():
		return nil, errGroupsTimeout
	}
}

// errGroupsTimeout is a wait for the shards' coordinators running past
// its deadline.
var errGroupsTimeout = errors.New("groupshost: the shards did not answer for their group coordinators in time")

// needTopic answers a group request made before the topic exists: the
// metadata primary creates it (once) and answers ErrCoordinatorLoading
// meanwhile; another node asks the metadata primary to create it
// (askCreate) and points at it, which FindCoordinator names until the
// topic exists.
func (h *Host) needTopic(group string) error {
	if err := h.d.Ready(); err != nil {
		return err // the topic may exist: this node has not loaded the metadata yet
	}
	primary := h.d.MetaPrimary()
	switch {
	case primary <= 0:
		return service.Errorf(service.ErrCoordinatorNotAvailable, "no metadata primary is known to create %s for group %q; retry shortly",
			metadata.GroupsTopic, group)
	case primary != h.d.Self:
		e := service.Errorf(service.ErrNotCoordinator, "%s does not exist yet: node %d, the metadata primary, creates it and coordinates group %q until then",
			metadata.GroupsTopic, primary, group)
		e.Hint = &service.Hint{NodeID: primary, ClientAddr: h.d.AddrOf(primary)}
		h.askCreate(primary)
		return e
	}
	if !h.stopped.Load() && h.creating.CompareAndSwap(false, true) {
		// The answer runs on the controller's shard; each shard then
		// looks at the new routes at once rather than at its tick.
		h.data.CreateGroupsTopic(h.d.Partitions, func(err error) {
			if err != nil {
				h.d.Infof("groups: creating the internal topic failed", "topic", metadata.GroupsTopic, "error", err)
			}
			h.creating.Store(false)
			for _, gs := range h.shards {
				_ = gs.sh.Post(func() { h.refresh(gs) })
			}
		})
	}
	return service.Errorf(service.ErrCoordinatorLoading, "node %d is creating %s, which will hold group %q; retry shortly",
		h.d.Self, metadata.GroupsTopic, group)
}

// askCreate asks primary to create the topic, at most once every
// groupsTopicAskGap. Kafka creates its offsets topic at the first
// FindCoordinator whatever broker it reaches; a client that only asks
// where a group's coordinator is and then waits for the topic in
// Metadata (franz-go's tests do) needs that of every node.
func (h *Host) askCreate(primary int32) {
	if h.d.AskCreate == nil || h.stopped.Load() {
		return
	}
	now := h.d.Clock.Now().UnixNano()
	last := h.askedNs.Load()
	if last != 0 && now-last < int64(groupsTopicAskGap) {
		return
	}
	if h.askedNs.CompareAndSwap(last, now) {
		h.d.AskCreate(primary)
	}
}

// Find implements nodesvc.Coordinators: the node that coordinates
// group, the primary of its partition, or, until the topic exists, the
// metadata primary (which creates it at the group's first request, made
// of it or of any other node).
// Callable from any goroutine.
func (h *Host) Find(group string) (service.GroupCoordinator, error) {
	routes, err := h.data.GroupsRoutes()
	if err != nil {
		return service.GroupCoordinator{NodeID: -1}, err
	}
	if routes == nil {
		// Starts the create here on the metadata primary, else asks the
		// primary for it; the answer names the primary meanwhile.
		_ = h.needTopic(group)
	}
	id := h.d.MetaPrimary()
	where := "the metadata primary"
	if routes != nil {
		p := groupsPartitionOf(group, len(routes))
		id = routes[p].PrimaryID
		where = fmt.Sprintf("%s partition %d", metadata.GroupsTopic, p)
	}
	if id <= 0 {
		return service.GroupCoordinator{NodeID: -1}, service.Errorf(service.ErrCoordinatorNotAvailable,
			"%s, which coordinates group %q, has no primary now; retry shortly", where, group)
	}
	return service.GroupCoordinator{NodeID: id, ClientAddr: h.d.AddrOf(id), KafkaAddr: h.d.KafkaAddrOf(id)}, nil
}

// PartLog is a coordinator's log: partition p of the internal
// topic, written at generation gen, so that a write after the node lost
// the partition is refused (the generation fences it) instead of landing
// in a log another coordinator now writes. Its calls are made from sh,
// the partition's shard and the coordinator's owner, and answered there.
type PartLog struct {
	data Data
	// sh is the shard the calls are made from; nil (a test reading the
	// log) answers on the partition's shard.
	sh     *shard.Shard
	p, gen int32
	// clock stamps the records.
	clock clock.Clock
}

// NewPartLog is the log of partition p of the internal topic at
// generation gen, its calls made from sh (nil: answered on the
// partition's shard) and its records stamped on c.
func NewPartLog(data Data, sh *shard.Shard, p, gen int32, c clock.Clock) *PartLog {
	return &PartLog{data: data, sh: sh, p: p, gen: gen, clock: c}
}

var (
	_ groups.Log           = (*PartLog)(nil)
	_ nodesvc.Coordinators = (*Host)(nil)
	_ Data                 = (*nodesvc.Service)(nil)
)

// Append produces recs as one batch with acks = quorum. Batches of
// successive Appends reach the partition's replica in order (on its own
// shard, inline), so the log keeps the coordinator's order.
func (l *PartLog) Append(recs []groups.Record, done func(error)) {
	l.append(recs, func(_ int64, err error) { done(err) })
}

// append is Append that answers the batch's base offset.
func (l *PartLog) append(recs []groups.Record, done func(int64, error)) {
	b, err := groupsBatch(recs, l.clock.Now().UnixMilli())
	if err != nil {
		done(0, err)
		return
	}
	l.data.ProduceInternal(l.sh, &service.ProduceRequest{PartitionRef: l.ref(), Acks: service.AcksQuorum, Timeout: groupsCallTimeout, Records: b},
		func(res service.ProduceResult, err error) { done(res.BaseOffset, coordinatorErr(err, l.p)) })
}

func (l *PartLog) ref() service.PartitionRef {
	return service.PartitionRef{Topic: metadata.GroupsTopic, Partition: l.p, Generation: l.gen}
}

// Fetch reads committed records from offset on, and answers them with
// the offset to read next. Control batches (the consensus layer's) are
// skipped. An offset below the log start (the segments below a
// checkpoint were deleted: checkpoint.go) answers no records and
// the log start.
func (l *PartLog) Fetch(from int64, done func(recs []groups.Record, next int64, err error)) {
	nodesvc.FetchCommitted(l.data.Fetch, l.sh, l.ref(), from, groupsLoadFetchBytesMax, func(buf []byte, at int64, err error) {
		if err != nil {
			done(nil, at, err)
			return
		}
		done(groupsRecords(buf, at))
	})
}

// groupsRecords splits fetched batches into the coordinator's records
// at or past from, and the offset after the last batch.
func groupsRecords(buf []byte, from int64) ([]groups.Record, int64, error) {
	var out []groups.Record
	next, err := eachGroupsRecord(buf, from, func(_ int64, key, value []byte) {
		rec := groups.Record{Key: append([]byte(nil), key...)}
		if value != nil {
			rec.Value = append([]byte{}, value...)
		}
		out = append(out, rec)
	})
	if err != nil {
		return nil, from, err
	}
	return out, next, nil
}

// groupsBatch is recs as one record batch stamped nowMs.
func groupsBatch(recs []groups.Record, nowMs int64) ([]byte, error) {
	b, err := batch.NewBuilder(batch.Options{})
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		if err := b.AppendKV(nowMs, r.Key, r.Value); err != nil {
			return nil, err
		}
	}
	return b.Build()
}

// coordinatorErr is a log write's error as a group call answers it: a
// partition this node no longer leads means another node coordinates
// the group now (ErrNotCoordinator: the member finds it); anything else
// is the service's error.
func coordinatorErr(err error, p int32) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, partition.ErrNotPrimary), errors.Is(err, partition.ErrStaleGeneration),
		errors.Is(err, partition.ErrPrimaryNotAvailable):
		return service.Errorf(service.ErrNotCoordinator, "the group's state could not be written: %s partition %d moved (%v); find the coordinator again",
			metadata.GroupsTopic, p, err)
	}
	return service.Errorf(service.ErrCoordinatorNotAvailable, "the group's state could not be written to %s partition %d: %v; retry",
		metadata.GroupsTopic, p, err)
}
