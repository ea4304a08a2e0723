// Package history keeps a node's recent figures: a bounded ring of
// samples, taken every few seconds by the node and served by the HTTP
// API, from which the console draws its charts (docs/console.md). It is
// a leaf: it reads no clock and starts no goroutine; the node takes the
// samples on a shard's timer and stamps them with its own clock.
//
// A sample holds counters since the node started (requests, bytes,
// records) and gauges of the moment (partitions led, under-replicated,
// offline, each group's lag). A reader takes rates from two neighbouring
// samples and their times, as it does from GET /v1/stats; a counter that
// went down between two samples is a restart of the node, not a rate.
package history

import "sync"

// Bounds of a ring.
const (
	// SamplesMaxLimit caps a ring's capacity: at one sample every 5 s it
	// is a little more than 5 hours, and a ring of it is about 1 MiB with
	// no group lag in it.
	SamplesMaxLimit = 4096
	// GroupsPerSampleMax bounds the groups a sample holds (the node keeps
	// the first by name); a sample says how many it left out.
	GroupsPerSampleMax = 64
	// GroupPartitionsPerSampleMax bounds the groups' partition lags a
	// sample holds (of its groups, in name order), so a ring of 180
	// samples stays under about 2 MiB however many partitions the groups
	// commit; a sample says how many it left out.
	GroupPartitionsPerSampleMax = 128
	// TopicsPerSampleMax bounds the topics a sample counts records of
	// (the first by name among those the node leads partitions of); a
	// sample says how many it left out.
	TopicsPerSampleMax = 64
)

// GroupPartitionLag is one consumer group's lag on one partition at a
// sample, as /metrics serves it (corestream_group_partition_lag_records).
type GroupPartitionLag struct {
	Group     string `json:"group"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Lag       int64  `json:"lag"`
}

// TopicRecords counts the records one topic's partitions committed
// while this node led them, since the node started: a counter, whose
// rate between samples is the topic's produce rate through this node.
type TopicRecords struct {
	Topic   string `json:"topic"`
	Records int64  `json:"records"`
}

// GroupLag is one consumer group's lag at a sample: the records between
// its committed offsets and the high watermarks, summed over its
// partitions, as /metrics serves it (corestream_group_lag_records).
type GroupLag struct {
	Group string `json:"group"`
	Lag   int64  `json:"lag"`
}

// Sample is one node's figures at one moment.
type Sample struct {
	// TimeMs is the node's clock at the sample, in ms since the epoch.
	TimeMs int64 `json:"time_ms"`
	// The service's counters since the node started (GET /v1/stats):
	// produce calls answered, the bytes they acknowledged as primary and
	// those answered with an error; fetch calls likewise.
	ProduceRequests int64 `json:"produce_requests"`
	ProducedBytes   int64 `json:"produced_bytes"`
	ProduceErrors   int64 `json:"produce_errors"`
	FetchRequests   int64 `json:"fetch_requests"`
	FetchedBytes    int64 `json:"fetched_bytes"`
	FetchErrors     int64 `json:"fetch_errors"`
	// ProducedRecords counts the offsets the partitions this node leads
	// committed since it started (their high watermarks' advances while
	// it led them); FetchedRecords the offsets of the batches its fetches
	// answered.
	ProducedRecords int64 `json:"produced_records"`
	FetchedRecords  int64 `json:"fetched_records"`
	// PrimaryMoves counts the primary moves that finished on this node
	// (corestream_primary_moves_finished_total): a chart marks where it
	// rose.
	PrimaryMoves int64 `json:"primary_moves"`
	// MetadataGeneration is the metadata group's term as this node knew
	// it (-1: none): a rise is a metadata primary election.
	MetadataGeneration int32 `json:"metadata_generation"`
	// MetadataPrimaryID is the metadata primary as this node knew it (-1:
	// none): the node that counts Offline.
	MetadataPrimaryID int32 `json:"metadata_primary_id"`
	// Gauges of the moment, as /metrics serves them.
	PartitionsLed   int32 `json:"partitions_led"`
	UnderReplicated int32 `json:"under_replicated"`
	Offline         int32 `json:"offline"`
	NodesAlive      int32 `json:"nodes_alive"`
	// Groups are the lags of the groups this node coordinates (at most
	// GroupsPerSampleMax, by name); GroupsOmitted how many were left out.
	Groups        []GroupLag `json:"groups"`
	GroupsOmitted int        `json:"groups_omitted"`
	// GroupPartitions are those groups' lags per partition (at most
	// GroupPartitionsPerSampleMax); GroupPartitionsOmitted how many were
	// left out.
	GroupPartitions        []GroupPartitionLag `json:"group_partitions"`
	GroupPartitionsOmitted int                 `json:"group_partitions_omitted"`
	// Topics split ProducedRecords by topic (at most TopicsPerSampleMax,
	// by name); TopicsOmitted counts the topics left out.
	Topics        []TopicRecords `json:"topics"`
	TopicsOmitted int            `json:"topics_omitted"`
}

// Ring is a bounded ring of samples, oldest first: adding to a full ring
// drops its oldest. Safe for concurrent use: the node adds from its
// sampler, the HTTP API reads.
//
// mu guards buf, start and n.
type Ring struct {
	mu sync.Mutex
	// buf holds the samples; its length is the capacity.
	// Invariant: 0 <= start < len(buf), 0 <= n <= len(buf).
	buf      []Sample
	start, n int
}

// NewRing returns an empty ring of capacity samplesMax, clamped to
// 1..SamplesMaxLimit.
func NewRing(samplesMax int) *Ring {
	return &Ring{buf: make([]Sample, min(max(samplesMax, 1), SamplesMaxLimit))}
}

// Add appends s, dropping the oldest sample when the ring is full. The
// ring keeps s's slices: the caller gives up their ownership.
func (r *Ring) Add(s Sample) {
	if len(s.Groups) > GroupsPerSampleMax {
		s.GroupsOmitted += len(s.Groups) - GroupsPerSampleMax
		s.Groups = s.Groups[:GroupsPerSampleMax]
	}
	if len(s.GroupPartitions) > GroupPartitionsPerSampleMax {
		s.GroupPartitionsOmitted += len(s.GroupPartitions) - GroupPartitionsPerSampleMax
		s.GroupPartitions = s.GroupPartitions[:GroupPartitionsPerSampleMax]
	}
	if len(s.Topics) > TopicsPerSampleMax {
		s.TopicsOmitted += len(s.Topics) - TopicsPerSampleMax
		s.Topics = s.Topics[:TopicsPerSampleMax]
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n < len(r.buf) {
		r.buf[(r.start+r.n)%len(r.buf)] = s
		r.n++
		return
	}
	r.buf[r.start] = s
	r.start = (r.start + 1) % len(r.buf)
}

// Samples returns the ring's samples, oldest first, as a new slice (the
// samples' slices are shared and must not be changed).
func (r *Ring) Samples() []Sample {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Sample, r.n)
	for i := range r.n {
		out[i] = r.buf[(r.start+i)%len(r.buf)]
	}
	return out
}

// Cap is the ring's capacity in samples.
func (r *Ring) Cap() int { return len(r.buf) }
