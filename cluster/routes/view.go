package routes

import (
	"encoding/binary"
	"sort"
	"sync"

	"github.com/corestream/corestream/cluster/peerwire"

	"github.com/corestream/corestream/cluster/metadata"
)

// View is an immutable copy of the metadata that every shard reads
// without locks: the controller builds a new one after each batch of
// applied commands and publishes it with an atomic store. *metadata.Topic
// values are never modified once applied (the state machine copies on
// write), so a View may share them.
type View struct {
	// Applied is the metadata log offset the view reflects (-1: none).
	Applied int64
	Topics  map[string]*metadata.Topic
	ByID    map[metadata.TopicID]*metadata.Topic
	// Sorted lists the topics by name.
	Sorted []*metadata.Topic
	// Users holds the users by name (the state copies users on write, so
	// the view may share them).
	Users map[string]*metadata.User
	// Moving holds the replica moves in progress by partition key
	// (reassign.go); Moves the same, by topic and partition.
	Moving map[[20]byte]*metadata.Reassignment
	Moves  []*metadata.Reassignment
	// Roster is the committed roster by id (nil until recorded).
	Roster []*metadata.Member
	// ClusterID is the cluster's id (zero until minted); Drains the
	// nodes marked draining, by node id.
	ClusterID metadata.ClusterID
	Drains    map[metadata.NodeID]*metadata.Drain
}

// NewView copies state s, applied up to offset applied, into a View.
func NewView(s *metadata.State, applied int64) *View {
	v := &View{Applied: applied, Topics: map[string]*metadata.Topic{}, ByID: map[metadata.TopicID]*metadata.Topic{}}
	v.Sorted = s.Topics()
	v.Users = map[string]*metadata.User{}
	for _, u := range s.Users() {
		v.Users[u.Name] = u
	}
	for _, t := range v.Sorted {
		v.Topics[t.Name] = t
		v.ByID[t.ID] = t
	}
	v.Moves = s.Reassignments()
	v.Roster = s.Roster()
	v.Moving = make(map[[20]byte]*metadata.Reassignment, len(v.Moves))
	for _, m := range v.Moves {
		v.Moving[Key(m.TopicID, m.Partition)] = m
	}
	v.ClusterID = s.ClusterID()
	v.Drains = map[metadata.NodeID]*metadata.Drain{}
	for _, d := range s.Drains() {
		v.Drains[d.Node] = d
	}
	return v
}

// Route is what a node knows of one partition's primary.
type Route struct {
	Leader int32 // node id; -1 when none
	Term   int32
	// InSync lists the replicas caught up with the primary, as the primary
	// reported them (nil: unknown, treat every live replica as in sync).
	InSync []int32
}

// Table is the node-wide table of partition primaries. Replicas write it
// from their shards when their leader or term changes (rare); metadata
// requests on any shard read it.
//
// mu guards m.
type Table struct {
	mu sync.RWMutex
	m  map[[20]byte]Route
}

// Set records r as partition key's route, whatever was there.
func (rt *Table) Set(key [20]byte, r Route) {
	rt.mu.Lock()
	if rt.m == nil {
		rt.m = map[[20]byte]Route{}
	}
	rt.m[key] = r
	rt.mu.Unlock()
}

// Get returns partition key's route, if one is known.
func (rt *Table) Get(key [20]byte) (Route, bool) {
	rt.mu.RLock()
	r, ok := rt.m[key]
	rt.mu.RUnlock()
	return r, ok
}

// SetLocal records what a local replica knows of its primary, unless
// this node already holds a newer generation, learned from that
// generation's primary: a replica that has just opened (generation 0, no
// primary) or that lags a term behind must not hide the primary the
// cluster announced, nor bring back an older one. It reports whether r
// was stored. (Found by the control-plane simulator, seeds 98 and 397: a
// node cut off while a topic was created learned the primary's
// announcement on the heal, then opened its replica and told its clients
// the partition had no primary, or named a deposed one.)
func (rt *Table) SetLocal(key [20]byte, r Route) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.m == nil {
		rt.m = map[[20]byte]Route{}
	}
	if old, ok := rt.m[key]; ok && old.Term > r.Term {
		return false
	}
	rt.m[key] = r
	return true
}

// Learn records a route announced by a peer unless this node already
// knows a newer generation (or a primary for the same one: one leader per
// term).
func (rt *Table) Learn(key [20]byte, r Route) {
	rt.mu.Lock()
	if rt.m == nil {
		rt.m = map[[20]byte]Route{}
	}
	old, ok := rt.m[key]
	if !ok || r.Term > old.Term || (r.Term == old.Term && (old.Leader <= 0 || old.Leader == r.Leader)) {
		rt.m[key] = r
	}
	rt.mu.Unlock()
}

// LedBy returns, as announcements, every route whose primary is node id.
func (rt *Table) LedBy(id int32) []peerwire.Route {
	rt.mu.RLock()
	defer rt.mu.RUnlock()
	var out []peerwire.Route
	for key, r := range rt.m {
		if r.Leader == id {
			out = append(out, Announcement(key, r))
		}
	}
	return out
}

// Announcement is route r of partition key as a peerwire.Route.
func Announcement(key [20]byte, r Route) peerwire.Route {
	a := peerwire.Route{Partition: int32(binary.BigEndian.Uint32(key[16:])), Leader: r.Leader, Term: r.Term}
	copy(a.TopicID[:], key[:16])
	for _, id := range r.InSync {
		if id >= 1 && id <= 32 {
			a.InSync |= 1 << (id - 1)
		}
	}
	return a
}

// Announced is the inverse of Announcement: a peer's announcement as
// its partition key and route.
func Announced(a peerwire.Route) ([20]byte, Route) {
	var inSync []int32
	for i := 0; i < 32; i++ {
		if a.InSync&(1<<i) != 0 {
			inSync = append(inSync, int32(i+1))
		}
	}
	return Key(a.TopicID, a.Partition), Route{Leader: a.Leader, Term: a.Term, InSync: inSync}
}

// Drop forgets partition key's route.
func (rt *Table) Drop(key [20]byte) {
	rt.mu.Lock()
	delete(rt.m, key)
	rt.mu.Unlock()
}

// UsersSorted lists the view's users by name.
func (v *View) UsersSorted() []*metadata.User {
	out := make([]*metadata.User, 0, len(v.Users))
	for _, u := range v.Users {
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
