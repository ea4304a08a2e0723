package node

import (
	"sync"

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
}

func newView(s *metadata.State, applied int64) *View {
	v := &View{Applied: applied, Topics: map[string]*metadata.Topic{}, ByID: map[metadata.TopicID]*metadata.Topic{}}
	v.Sorted = s.Topics()
	for _, t := range v.Sorted {
		v.Topics[t.Name] = t
		v.ByID[t.ID] = t
	}
	return v
}

// route is what a node knows of one partition's primary.
type route struct {
	leader int32 // node id; -1 when none
	term   int32
	// inSync lists the replicas caught up with the primary, as the primary
	// reported them (nil: unknown, treat every live replica as in sync).
	inSync []int32
}

// routes is the node-wide table of partition primaries. Replicas write it
// from their shards when their leader or term changes (rare); metadata
// requests on any shard read it.
//
// mu guards m.
type routes struct {
	mu sync.RWMutex
	m  map[[20]byte]route
}

func (rt *routes) set(key [20]byte, r route) {
	rt.mu.Lock()
	if rt.m == nil {
		rt.m = map[[20]byte]route{}
	}
	rt.m[key] = r
	rt.mu.Unlock()
}

func (rt *routes) get(key [20]byte) (route, bool) {
	rt.mu.RLock()
	r, ok := rt.m[key]
	rt.mu.RUnlock()
	return r, ok
}

func (rt *routes) drop(key [20]byte) {
	rt.mu.Lock()
	delete(rt.m, key)
	rt.mu.Unlock()
}
