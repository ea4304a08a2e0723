package client

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/corestream/corestream/netio/wire"
)

// route is where one partition's data requests go and what they carry.
type route struct {
	ref       wire.PartitionRef
	primaryID int32
	addr      string
}

// metaCache is the client's view of the cluster: nodes and partition
// routes. Readers take the read lock; refreshes and hints the write lock.
type metaCache struct {
	mu sync.RWMutex
	// nodes by id. Guarded by mu.
	nodes map[int32]wire.Node
	// metadataPrimary is the metadata group's primary, -1 unknown; and
	// metadataGen its term. Guarded by mu.
	metadataPrimary, metadataGen int32
	// topics by name. Guarded by mu. A topicMeta is replaced, never
	// modified, except for its partitions' routes under the write lock.
	topics map[string]*topicMeta
	// updated is when the last full refresh was applied. Guarded by mu.
	updated time.Time
	// trusted says the last refresh applied a trusted answer (one from a
	// node that saw the metadata quorum): what it lacks does not exist.
	// Guarded by mu.
	trusted bool

	// version grows on every change, so that holders of derived state (a
	// producer's partition counts) notice cheaply.
	version atomic.Uint64
	// changed is closed, and replaced, on every change, so that a producer
	// backing off on a partition wakes when its route moves on. Guarded by
	// mu.
	changed chan struct{}
}

// topicMeta is one topic as the metadata showed it.
type topicMeta struct {
	name  string
	id    wire.TopicID
	rf    int16
	parts []partMeta
}

// partMeta is one partition's route.
type partMeta struct {
	err       int16
	primary   int32
	addr      string
	gen       int32
	preferred int32
	replicas  []int32
	inSync    []int32
	offline   []int32
}

func newMetaCache() *metaCache {
	return &metaCache{nodes: map[int32]wire.Node{}, topics: map[string]*topicMeta{}, metadataPrimary: wire.NodeNone,
		changed: make(chan struct{})}
}

// bumpLocked records a change: the version grows and watchers wake.
// REQUIRES: m.mu held for writing.
func (m *metaCache) bumpLocked() {
	m.version.Add(1)
	close(m.changed)
	m.changed = make(chan struct{})
}

// watch returns a channel closed at the cache's next change.
func (m *metaCache) watch() <-chan struct{} {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.changed
}

// apply replaces the cache with a full metadata answer. A partition whose
// cached route has the same topic id and a newer generation (learnt from a
// hint, while the answering node lags) keeps its cached primary.
func (m *metaCache) apply(r *wire.MetadataResponse) {
	nodes := make(map[int32]wire.Node, len(r.Nodes))
	for _, n := range r.Nodes {
		nodes[n.ID] = n
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	topics := make(map[string]*topicMeta, len(r.Topics))
	for i := range r.Topics {
		t := &r.Topics[i]
		if t.ErrorCode != wire.CodeNone {
			continue
		}
		tm := &topicMeta{name: t.Name, id: t.ID, rf: t.ReplicationFactor, parts: make([]partMeta, len(t.Partitions))}
		old := m.topics[t.Name]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if p.Partition != int32(j) {
				continue // not in partition order: leave the slot unroutable
			}
			pm := partMeta{err: p.ErrorCode, primary: p.PrimaryID, gen: p.Generation, preferred: p.PreferredPrimaryID,
				replicas: append([]int32(nil), p.Replicas...), inSync: append([]int32(nil), p.InSync...),
				offline: append([]int32(nil), p.Offline...)}
			if n, ok := nodes[p.PrimaryID]; ok {
				pm.addr = n.ClientAddr
			}
			if old != nil && old.id == t.ID && j < len(old.parts) {
				// A node that lags may report an older primary, or none:
				// keep the newer route we had — unless its node is now
				// reported down, when "no primary" is the truth.
				o := old.parts[j]
				oldAlive := nodes[o.primary].Alive
				if o.gen > pm.gen && o.addr != "" && (p.PrimaryID != wire.NodeNone || oldAlive) {
					pm.primary, pm.addr, pm.gen, pm.err = o.primary, o.addr, o.gen, wire.CodeNone
				}
			}
			tm.parts[j] = pm
		}
		topics[t.Name] = tm
	}
	m.nodes, m.topics = nodes, topics
	m.metadataPrimary, m.metadataGen = r.MetadataPrimaryID, r.MetadataGeneration
	m.updated = time.Now()
	m.bumpLocked()
}

// applyRanked applies a refresh's answer of quality q: a trusted answer
// replaces the cache (apply); an untrusted one is merged (merge).
func (m *metaCache) applyRanked(r *wire.MetadataResponse, q metaQuality) {
	if q.trusted {
		m.apply(r)
	} else {
		m.merge(r)
	}
	m.mu.Lock()
	m.trusted = q.trusted
	m.mu.Unlock()
}

// merge applies an untrusted answer (from a node that does not see the
// metadata quorum: cut off from its peers, or still replaying) without
// letting its partial view poison the cache: it adds the topics and nodes
// the cache lacks, takes a partition's route from it only when that route
// has a primary at a generation not older than the cached one, and never
// replaces a usable cached route with "no primary", drops a topic, or
// marks a node down. A route kept this way is checked by the broker on
// every request (topic id and generation), so a wrong one costs a
// NOT_PRIMARY or a failed connection, which refreshes again.
func (m *metaCache) merge(r *wire.MetadataResponse) {
	m.mu.Lock()
	defer m.mu.Unlock()
	nodes := make(map[int32]wire.Node, len(m.nodes)+len(r.Nodes))
	for id, n := range m.nodes {
		nodes[id] = n
	}
	for _, n := range r.Nodes {
		if old, ok := nodes[n.ID]; ok {
			n.Alive = old.Alive || n.Alive
		}
		nodes[n.ID] = n
	}
	topics := make(map[string]*topicMeta, len(m.topics)+len(r.Topics))
	for name, t := range m.topics {
		topics[name] = t
	}
	for i := range r.Topics {
		t := &r.Topics[i]
		old := m.topics[t.Name]
		if t.ErrorCode != wire.CodeNone || (old != nil && old.id != t.ID) {
			continue // which history is current is the trusted answers' call
		}
		tm := &topicMeta{name: t.Name, id: t.ID, rf: t.ReplicationFactor, parts: make([]partMeta, len(t.Partitions))}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if p.Partition != int32(j) {
				continue
			}
			pm := partMeta{err: p.ErrorCode, primary: p.PrimaryID, gen: p.Generation, preferred: p.PreferredPrimaryID,
				replicas: append([]int32(nil), p.Replicas...), inSync: append([]int32(nil), p.InSync...),
				offline: append([]int32(nil), p.Offline...)}
			if n, ok := nodes[p.PrimaryID]; ok {
				pm.addr = n.ClientAddr
			}
			if old != nil && j < len(old.parts) {
				o := old.parts[j]
				usable := o.err == wire.CodeNone && o.addr != ""
				better := pm.err == wire.CodeNone && pm.addr != "" && pm.gen >= o.gen
				if usable && !better {
					pm = o
				}
			}
			tm.parts[j] = pm
		}
		if old != nil && len(old.parts) > len(tm.parts) {
			tm.parts = append(tm.parts, old.parts[len(tm.parts):]...)
		}
		topics[t.Name] = tm
	}
	m.nodes, m.topics = nodes, topics
	if m.metadataPrimary == wire.NodeNone {
		m.metadataPrimary, m.metadataGen = r.MetadataPrimaryID, r.MetadataGeneration
	}
	m.bumpLocked()
}

// confirmsAbsent reports whether the cache, as last refreshed from a
// trusted answer, shows that topic/partition does not exist.
func (m *metaCache) confirmsAbsent(topic string, partition int32) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if !m.trusted {
		return false
	}
	t := m.topics[topic]
	return t == nil || partition >= int32(len(t.parts))
}

// lookup returns the route of topic/partition, or the wire error that says
// why there is none: UNKNOWN_TOPIC_OR_PARTITION, the partition's own error
// code, or PRIMARY_NOT_AVAILABLE.
func (m *metaCache) lookup(topic string, partition int32) (route, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	t := m.topics[topic]
	if t == nil {
		return route{}, wire.Errorf(wire.ErrUnknownTopicOrPartition, "topic %q is not in the cluster metadata", topic)
	}
	if partition < 0 || int(partition) >= len(t.parts) {
		return route{}, wire.Errorf(wire.ErrUnknownTopicOrPartition, "topic %q has %d partitions, no partition %d", topic, len(t.parts), partition)
	}
	p := &t.parts[partition]
	if p.err != wire.CodeNone {
		return route{}, &wire.ErrorResponse{Err: codeError(p.err), Message: "partition " + topic + "/" + strconv.Itoa(int(partition)) + " in metadata"}
	}
	if p.primary == wire.NodeNone || p.addr == "" {
		return route{}, wire.Errorf(wire.ErrPrimaryNotAvailable, "partition %s/%d has no primary right now", topic, partition)
	}
	return route{
		ref:       wire.PartitionRef{Topic: topic, TopicID: t.id, Partition: partition, Generation: p.gen},
		primaryID: p.primary, addr: p.addr,
	}, nil
}

// applyHint updates one partition's primary from a NOT_PRIMARY or
// STALE_GENERATION hint, unless the cache already knows a newer
// generation. It reports whether the route changed.
func (m *metaCache) applyHint(topic string, partition int32, h *wire.Hint) bool {
	if h == nil || h.NodeID == wire.NodeNone {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.topics[topic]
	if t == nil || partition < 0 || int(partition) >= len(t.parts) {
		return false
	}
	p := &t.parts[partition]
	if h.Generation != wire.GenerationUnknown && h.Generation < p.gen {
		return false
	}
	addr := h.Address
	if addr == "" {
		addr = m.nodes[h.NodeID].ClientAddr
	}
	if addr == "" {
		return false
	}
	changed := p.primary != h.NodeID || p.addr != addr || (h.Generation != wire.GenerationUnknown && h.Generation != p.gen)
	p.primary, p.addr, p.err = h.NodeID, addr, wire.CodeNone
	if h.Generation != wire.GenerationUnknown {
		p.gen = h.Generation
	}
	if _, ok := m.nodes[h.NodeID]; !ok {
		m.nodes[h.NodeID] = wire.Node{ID: h.NodeID, ClientAddr: addr, Alive: true}
	}
	m.bumpLocked()
	return changed
}

// topic returns the cached topic, or nil.
func (m *metaCache) topic(name string) *topicMeta {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.topics[name]
}

// partitions returns the topic's partition count and id; ok is false when
// the topic is not cached.
func (m *metaCache) partitions(name string) (n int32, id wire.TopicID, ok bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	t := m.topics[name]
	if t == nil {
		return 0, wire.TopicID{}, false
	}
	return int32(len(t.parts)), t.id, true
}

// metadataPrimaryAddr returns the metadata primary's id and address, or
// NodeNone and "".
func (m *metaCache) metadataPrimaryAddr() (int32, string) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	n, ok := m.nodes[m.metadataPrimary]
	if !ok {
		return wire.NodeNone, ""
	}
	return n.ID, n.ClientAddr
}

// addrs returns the client addresses of the known nodes, alive ones first.
func (m *metaCache) addrs() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var alive, dead []string
	for _, n := range m.nodes {
		if n.Alive {
			alive = append(alive, n.ClientAddr)
		} else {
			dead = append(dead, n.ClientAddr)
		}
	}
	return append(alive, dead...)
}

// age is the time since the last full refresh.
func (m *metaCache) age() time.Duration {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.updated.IsZero() {
		return time.Duration(1<<63 - 1)
	}
	return time.Since(m.updated)
}

// codeError returns the table's *wire.Error for a non-zero code.
func codeError(code int16) *wire.Error {
	e, _ := wire.ErrorForCode(code).(*wire.Error)
	if e == nil {
		return wire.ErrUnknownServerError
	}
	return e
}
