package node

import (
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corestream/corestream/cluster/clock"
	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/groups"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"
)

// The coordinators of consumer groups (docs/design/groups.md). Group
// state lives in the internal topic __groups (metadata.GroupsTopic) of
// cluster.groups_partitions partitions; group g lives in partition
// hash(g) mod N, and that partition's primary coordinates it. This node
// runs one groups.Coordinator per partition it leads, whose log is the
// partition: each change is produced there with acks = quorum before it
// is answered, and a node that becomes a partition's primary replays the
// partition before it answers for its groups.

// Bounds of the coordinators and their log.
const (
	// groupsTick is how often the coordinators expire sessions and end
	// rebalances that ran out of time (a member is removed at most this
	// late past its session timeout), and how often the node reads which
	// partitions of the internal topic it leads.
	groupsTick = 100 * time.Millisecond
	// groupsLoadFetchBytesMax bounds one fetch of a replay.
	groupsLoadFetchBytesMax = 1 << 20
	// groupsCallTimeout bounds one produce or fetch a coordinator makes,
	// and a create of the topic.
	groupsCallTimeout = 10 * time.Second
	// groupsLoadRetryWait is how long a load waits before it retries a
	// call the partition refused for now (its replica still opening).
	groupsLoadRetryWait = 50 * time.Millisecond
	// groupsLoadAttemptsMax bounds those retries (about 10 s of them);
	// the next route refresh starts a new load.
	groupsLoadAttemptsMax = 200
)

// groupsPartitionOf is the partition of the internal topic that group
// lives in: FNV-1a of the name, mod n. Never to change: a group moved to
// another partition would lose its state.
func groupsPartitionOf(group string, n int) int32 {
	h := fnv.New32a()
	h.Write([]byte(group))
	return int32(h.Sum32() % uint32(n))
}

// groupsData are the service calls the coordinators' logs make.
type groupsData interface {
	// produceInternal is Produce, which refuses clients the internal
	// topics.
	produceInternal(from *shard.Shard, req *service.ProduceRequest, done func(service.ProduceResult, error))
	Fetch(from *shard.Shard, req *service.FetchRequest, done func(service.FetchResult, error))
	// groupsRoutes are the internal topic's routes, nil while it does
	// not exist; an error while the node has not loaded the metadata.
	groupsRoutes() ([]service.PartitionRoute, error)
}

// groupsHostDeps is what the coordinators need of the node.
type groupsHostDeps struct {
	self int32
	// partitions is cluster.groups_partitions, used when this node
	// creates the topic; the topic's own count rules after that.
	partitions int
	cfg        groups.Config
	data       groupsData
	// createTopic asks the metadata primary's controller to create the
	// internal topic; done may run on any goroutine.
	createTopic func(partitions int, done func(error))
	// metaPrimary is the metadata group's primary (-1: none known).
	metaPrimary func() int32
	// ready is nil once the node has loaded the committed metadata
	// (else a service error saying why not): until then an unknown
	// topic may exist.
	ready func() error
	// addrOf and kafkaAddrOf are a node's advertised addresses.
	addrOf, kafkaAddrOf func(id int32) string
	// infof logs a coordinator's gain, load and loss of a partition.
	infof func(msg string, args ...any)
	// clock is the node's clock: the coordinators' ticks, the load's
	// timing and the records' timestamps read it.
	clock clock.Clock
}

// groupsHost runs the coordinators of the __groups partitions this node
// leads, and answers where the others are.
type groupsHost struct {
	d groupsHostDeps
	// mu guards the fields below.
	mu sync.Mutex
	// routes are the topic's routes at the last refresh; nil while the
	// topic does not exist (or was not seen yet).
	routes []service.PartitionRoute
	// parts are the partitions this node led at the last refresh, by
	// index. Invariant: parts[p].gen is the generation it led p at.
	parts map[int32]*groupsPart
	// creating says a create of the topic is in flight.
	creating bool
	stopped  bool
	done     chan struct{}
	wg       sync.WaitGroup
}

// groupsPart is one partition this node leads, with its coordinator.
type groupsPart struct {
	p, gen int32
	coord  *groups.Coordinator
	log    *groupsPartLog
	// loaded says the replay is done: the coordinator answers requests.
	loaded atomic.Bool
	// gone is closed when the node stops leading p at gen; the load
	// gives up then.
	gone chan struct{}
}

// newGroupsHost returns a host; start runs it.
func newGroupsHost(d groupsHostDeps) *groupsHost {
	if d.infof == nil {
		d.infof = func(string, ...any) {}
	}
	return &groupsHost{d: d, parts: map[int32]*groupsPart{}, done: make(chan struct{})}
}

// newGroups is the node's host of coordinators, to start once the
// service it calls exists.
func (n *Node) newGroups() *groupsHost {
	parts := n.cfg.Cluster.GroupsPartitions
	if parts <= 0 {
		parts = config.GroupsPartitionsDefault // a config made without config.Default
	}
	cfg := groups.DefaultConfig
	cfg.CheckpointRecords, cfg.CheckpointBytes = n.cfg.Cluster.GroupsCheckpointRecords, n.cfg.Cluster.GroupsCheckpointBytes
	return newGroupsHost(groupsHostDeps{self: int32(n.self), partitions: parts, cfg: cfg,
		metaPrimary: func() int32 { id, _ := n.metaRoute(); return id }, ready: n.metadataReady, addrOf: n.addrOf, kafkaAddrOf: n.kafkaAddrOf,
		infof: n.log.Info, clock: n.clock})
}

// start wires the host to the service and refreshes the routes and
// ticks the coordinators every groupsTick, until stop.
func (h *groupsHost) start(svc *nodeService) {
	h.d.data = svc
	h.d.createTopic = svc.createGroupsTopic
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		t := time.NewTicker(groupsTick)
		defer t.Stop()
		for {
			select {
			case <-h.done:
				return
			case <-t.C:
				h.refresh()
				now := h.d.clock.Now()
				for _, c := range h.loadedCoordinators() {
					c.Tick(now)
				}
			}
		}
	}()
}

// stop ends the ticks and drops every coordinator (parked calls are
// answered; their connections are closing). A nil host has nothing to
// stop.
func (h *groupsHost) stop() {
	if h == nil {
		return
	}
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		return
	}
	h.stopped = true
	close(h.done)
	parts := h.parts
	h.parts = map[int32]*groupsPart{}
	h.mu.Unlock()
	// Loads waiting on a produce or fetch give up now rather than at
	// its timeout.
	for _, pt := range parts {
		close(pt.gone)
	}
	h.wg.Wait()
	for _, pt := range parts {
		pt.coord.Reset()
	}
}

func (h *groupsHost) loadedCoordinators() []*groups.Coordinator {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*groups.Coordinator, 0, len(h.parts))
	for _, pt := range h.parts {
		if pt.loaded.Load() {
			out = append(out, pt.coord)
		}
	}
	return out
}

// refresh reads the topic's routes: a partition this node now leads (or
// leads at a new generation) gets a new coordinator that loads its
// state; one it no longer leads drops its coordinator, whose members
// are told they are unknown and find the new coordinator.
func (h *groupsHost) refresh() {
	routes, err := h.d.data.groupsRoutes()
	h.mu.Lock()
	if h.stopped {
		h.mu.Unlock()
		return
	}
	if err == nil {
		h.routes = routes
	}
	var dropped, started []*groupsPart
	led := map[int32]int32{}
	for _, r := range h.routes {
		if r.PrimaryID == h.d.self && r.Generation > 0 {
			led[r.Partition] = r.Generation
		}
	}
	for p, pt := range h.parts {
		if gen, ok := led[p]; !ok || gen != pt.gen {
			delete(h.parts, p)
			dropped = append(dropped, pt)
		}
	}
	for p, gen := range led {
		if h.parts[p] == nil {
			pt := &groupsPart{p: p, gen: gen, gone: make(chan struct{}), log: &groupsPartLog{data: h.d.data, p: p, gen: gen, clock: h.d.clock}}
			pt.coord = groups.NewLogged(h.d.cfg, pt.log)
			h.parts[p] = pt
			started = append(started, pt)
		}
	}
	for _, pt := range started {
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			h.load(pt)
		}()
	}
	h.mu.Unlock()
	for _, pt := range dropped {
		close(pt.gone)
		pt.coord.Reset()
		h.d.infof("groups: no longer coordinating", "partition", pt.p, "generation", pt.gen)
	}
}

// load makes a load marker durable in pt's partition, then replays the
// partition up to it into pt's coordinator, and marks it loaded. It
// gives up when the node stops leading the partition at pt's generation
// (the next refresh starts over), or after groupsLoadAttemptsMax
// refusals.
func (h *groupsHost) load(pt *groupsPart) {
	start := h.d.clock.Now()
	log := pt.log
	var marker int64
	for attempt := 0; ; attempt++ {
		off, err := log.appendWait([]groups.Record{groups.LoadMarker()}, pt.gone)
		if err == nil {
			marker = off
			break
		}
		if !h.retryLoad(pt, attempt, err) {
			return
		}
	}
	next, records := int64(0), 0
	for attempt := 0; next <= marker; {
		recs, nxt, err := log.fetchWait(next, pt.gone)
		if err != nil {
			if !h.retryLoad(pt, attempt, err) {
				return
			}
			attempt++
			continue
		}
		now := h.d.clock.Now()
		for _, r := range recs {
			if err := pt.coord.Replay(now, r); err != nil {
				// A record this coordinator cannot read is not one it
				// wrote: serving without it could answer a member
				// with state older than what it was told.
				h.d.infof("groups: cannot load the partition", "partition", pt.p, "error", err)
				return
			}
		}
		records += len(recs)
		next = nxt
	}
	pt.coord.Loaded()
	pt.loaded.Store(true)
	h.d.infof("groups: coordinating", "partition", pt.p, "generation", pt.gen, "records", records,
		"load_ms", clock.Since(h.d.clock, start).Milliseconds())
}

// retryLoad waits before a load's next attempt and says whether to make
// it: not once the partition is gone, the host stopped, or attempts ran
// out (then the part is forgotten, so the next refresh starts a new
// load if the node still leads the partition).
func (h *groupsHost) retryLoad(pt *groupsPart, attempt int, err error) bool {
	if attempt >= groupsLoadAttemptsMax {
		h.d.infof("groups: gave up loading the partition; the next refresh tries again", "partition", pt.p, "error", err)
		h.mu.Lock()
		if h.parts[pt.p] == pt {
			delete(h.parts, pt.p)
			close(pt.gone)
		}
		h.mu.Unlock()
		return false
	}
	t := time.NewTimer(groupsLoadRetryWait)
	defer t.Stop()
	select {
	case <-pt.gone:
		return false
	case <-h.done:
		return false
	case <-t.C:
		return true
	}
}

// coordinatorOf is the coordinator of group when this node coordinates
// it and has loaded its state, else the error to answer:
// ErrNotCoordinator (hint: the partition's primary),
// ErrCoordinatorLoading, or ErrCoordinatorNotAvailable.
func (h *groupsHost) coordinatorOf(group string) (*groups.Coordinator, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.routes == nil {
		return nil, h.needTopic(group)
	}
	p := groupsPartitionOf(group, len(h.routes))
	r := h.routes[p]
	if pt := h.parts[p]; pt != nil {
		if !pt.loaded.Load() {
			return nil, service.Errorf(service.ErrCoordinatorLoading,
				"node %d is loading the state of %s partition %d, which holds group %q; retry shortly", h.d.self, metadata.GroupsTopic, p, group)
		}
		return pt.coord, nil
	}
	if r.PrimaryID <= 0 || r.PrimaryID == h.d.self {
		return nil, service.Errorf(service.ErrCoordinatorNotAvailable,
			"%s partition %d, which holds group %q, has no primary now; retry shortly", metadata.GroupsTopic, p, group)
	}
	e := service.Errorf(service.ErrNotCoordinator, "node %d does not coordinate group %q: node %d, the primary of %s partition %d, does",
		h.d.self, group, r.PrimaryID, metadata.GroupsTopic, p)
	e.Hint = &service.Hint{NodeID: r.PrimaryID, Generation: r.Generation, ClientAddr: h.d.addrOf(r.PrimaryID)}
	return nil, e
}

// needTopic answers a group request made before the topic exists: the
// metadata primary creates it (once) and answers ErrCoordinatorLoading
// meanwhile; another node points at the metadata primary, which
// FindCoordinator names until the topic exists.
// REQUIRES: h.mu held.
func (h *groupsHost) needTopic(group string) error {
	if err := h.d.ready(); err != nil {
		return err // the topic may exist: this node has not loaded the metadata yet
	}
	primary := h.d.metaPrimary()
	switch {
	case primary <= 0:
		return service.Errorf(service.ErrCoordinatorNotAvailable, "no metadata primary is known to create %s for group %q; retry shortly",
			metadata.GroupsTopic, group)
	case primary != h.d.self:
		e := service.Errorf(service.ErrNotCoordinator, "%s does not exist yet: node %d, the metadata primary, creates it and coordinates group %q until then",
			metadata.GroupsTopic, primary, group)
		e.Hint = &service.Hint{NodeID: primary, ClientAddr: h.d.addrOf(primary)}
		return e
	}
	if !h.creating && !h.stopped {
		h.creating = true
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			ch := make(chan error, 1)
			h.d.createTopic(h.d.partitions, func(err error) { ch <- err })
			if err := <-ch; err != nil {
				h.d.infof("groups: creating the internal topic failed", "topic", metadata.GroupsTopic, "error", err)
			}
			h.refresh()
			h.mu.Lock()
			h.creating = false
			h.mu.Unlock()
		}()
	}
	return service.Errorf(service.ErrCoordinatorLoading, "node %d is creating %s, which will hold group %q; retry shortly",
		h.d.self, metadata.GroupsTopic, group)
}

// find is the node that coordinates group: the primary of its
// partition, or, until the topic exists, the metadata primary (which
// creates it at the group's first request).
func (h *groupsHost) find(group string) (service.GroupCoordinator, error) {
	h.mu.Lock()
	routes := h.routes
	if routes == nil {
		if err := h.d.ready(); err != nil {
			h.mu.Unlock()
			return service.GroupCoordinator{NodeID: -1}, err
		}
		if h.d.metaPrimary() == h.d.self {
			_ = h.needTopic(group) // starts the create; the answer names this node meanwhile
		}
	}
	h.mu.Unlock()
	id := h.d.metaPrimary()
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
	return service.GroupCoordinator{NodeID: id, ClientAddr: h.d.addrOf(id), KafkaAddr: h.d.kafkaAddrOf(id)}, nil
}

// groupsPartLog is a coordinator's log: partition p of the internal
// topic, written at generation gen, so that a write after the node lost
// the partition is refused (the generation fences it) instead of landing
// in a log another coordinator now writes.
type groupsPartLog struct {
	data   groupsData
	p, gen int32
	// clock stamps the records.
	clock clock.Clock
}

var _ groups.Log = (*groupsPartLog)(nil)

// Append produces recs as one batch with acks = quorum. Batches of
// successive Appends reach the partition's shard in order (one inbox),
// so the log keeps the coordinator's order.
func (l *groupsPartLog) Append(recs []groups.Record, done func(error)) {
	b, err := groupsBatch(recs, l.clock.Now().UnixMilli())
	if err != nil {
		done(err)
		return
	}
	l.data.produceInternal(nil, &service.ProduceRequest{PartitionRef: l.ref(), Acks: service.AcksQuorum, Timeout: groupsCallTimeout, Records: b},
		func(_ service.ProduceResult, err error) { done(coordinatorErr(err, l.p)) })
}

func (l *groupsPartLog) ref() service.PartitionRef {
	return service.PartitionRef{Topic: metadata.GroupsTopic, Partition: l.p, Generation: l.gen}
}

// appendWait is Append that waits, and answers the batch's base offset.
func (l *groupsPartLog) appendWait(recs []groups.Record, gone <-chan struct{}) (int64, error) {
	b, err := groupsBatch(recs, l.clock.Now().UnixMilli())
	if err != nil {
		return 0, err
	}
	type answer struct {
		off int64
		err error
	}
	ch := make(chan answer, 1)
	l.data.produceInternal(nil, &service.ProduceRequest{PartitionRef: l.ref(), Acks: service.AcksQuorum, Timeout: groupsCallTimeout, Records: b},
		func(res service.ProduceResult, err error) { ch <- answer{res.BaseOffset, err} })
	select {
	case a := <-ch:
		return a.off, a.err
	case <-gone:
		return 0, errGroupsPartitionGone
	}
}

// errGroupsPartitionGone: the node stopped leading the partition while
// a load waited on it.
var errGroupsPartitionGone = errors.New("node: no longer the primary of the groups partition")

// fetchWait reads committed records from offset on, and the offset to
// read next. Control batches (the consensus layer's) are skipped. An
// offset below the log start (the segments below a checkpoint were
// deleted: groups_checkpoint.go) answers no records and the log start.
func (l *groupsPartLog) fetchWait(from int64, gone <-chan struct{}) ([]groups.Record, int64, error) {
	type answer struct {
		buf   []byte
		start int64
		err   error
	}
	ch := make(chan answer, 1)
	l.data.Fetch(nil, &service.FetchRequest{PartitionRef: l.ref(), Offset: from, MaxBytes: groupsLoadFetchBytesMax},
		func(res service.FetchResult, err error) {
			var buf []byte
			if err == nil {
				buf, err = res.Records.AppendTo(nil)
				res.Records.Release()
			}
			ch <- answer{buf, res.LogStartOffset, err}
		})
	var a answer
	select {
	case a = <-ch:
	case <-gone:
		return nil, from, errGroupsPartitionGone
	}
	if a.err != nil && a.start > from {
		return nil, a.start, nil
	}
	if a.err != nil {
		return nil, from, a.err
	}
	return groupsRecords(a.buf, from)
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

// groupsRoutes implements groupsData: the routes as Metadata answers
// them, without counting a metadata request (the host reads them every
// groupsTick).
func (s *nodeService) groupsRoutes() ([]service.PartitionRoute, error) {
	if err := s.ready(); err != nil {
		return nil, s.svcErr(err)
	}
	t := s.view().Topics[metadata.GroupsTopic]
	if t == nil {
		return nil, nil
	}
	return s.topicMetadata(t).Partitions, nil
}

// groupsTopicCreator is the controller's create of the internal topic.
type groupsTopicCreator interface {
	createGroupsTopic(partitions int, done func(error))
}

// createGroupsTopic creates the internal topic with partitions
// partitions and the cluster's default replication factor (capped by the
// roster); a topic that exists already is success.
func (c *controller) createGroupsTopic(partitions int, done func(error)) {
	roster, eligible := c.rosterIDs()
	defRF := c.d.defaultRF.Resolve(len(roster))
	// Unlimited time and size retention: deleting old segments by age
	// would lose the state of groups that last changed long ago. The
	// segments below a complete checkpoint go instead
	// (groups_checkpoint.go).
	cmd, err := c.state.PlanCreateTopic(metadata.CreateRequest{Name: metadata.GroupsTopic, Partitions: partitions,
		Racks: c.rosterRacks(), Internal: true, Config: metadata.TopicConfig{RetentionMs: -1, RetentionBytes: -1}},
		roster, eligible, defRF, c.d.clock.Now().UnixMilli())
	if errors.Is(err, metadata.ErrTopicExists) {
		done(nil)
		return
	}
	if err != nil {
		done(metaKindErr(err))
		return
	}
	c.propose(cmd, groupsCallTimeout, func(_ metadata.Result, err error) {
		if err != nil && !errors.Is(err, metadata.ErrTopicExists) {
			done(metaKindErr(err))
			return
		}
		done(nil)
	})
}

// createGroupsTopic asks the controller, on its shard, to create the
// internal topic; done runs on the controller's shard.
func (s *nodeService) createGroupsTopic(partitions int, done func(error)) {
	adminCall(s, nil, true, func(c metadataAdmin, reply func(struct{}, error)) {
		gc, ok := c.(groupsTopicCreator)
		if !ok {
			reply(struct{}{}, service.Errorf(service.ErrInternal, "the metadata controller cannot create %s", metadata.GroupsTopic))
			return
		}
		gc.createGroupsTopic(partitions, func(err error) { reply(struct{}{}, err) })
	}, func(_ struct{}, err error) { done(err) })
}
