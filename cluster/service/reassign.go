package service

// Reassign actions (ReassignRequest.Action).
const (
	ReassignStart  = 0
	ReassignCancel = 1
	ReassignList   = 2
	// ReassignDrain marks Node draining: every replica and primary moves
	// off it; ReassignUndrain lifts the mark; ReassignReplace moves every
	// replica of Node onto Replacement (a node gone for good).
	ReassignDrain   = 3
	ReassignUndrain = 4
	ReassignReplace = 5
)

// ReassignRequest starts (checks, with DryRun), cancels or lists replica
// moves, or drains, undrains or replaces a node (metadata primary).
type ReassignRequest struct {
	Action int
	DryRun bool
	Moves  []ReassignMove
	// Node and Replacement: the node a drain, undrain or replace names,
	// and the node that takes its place (replace).
	Node, Replacement int32
	// ThrottleBytesPerSecond bounds the catch-up bytes each node sends to
	// the new replicas of these moves (start; 0: the node's
	// cluster.reassign_throttle_bytes_per_second).
	ThrottleBytesPerSecond int64
}

// ReassignMove is one partition's new replica list, preferred primary
// first (cancel: Replicas unused).
type ReassignMove struct {
	Topic     string
	Partition int32
	Replicas  []int32
}

// ReassignStatus is one move in progress.
type ReassignStatus struct {
	Topic                      string
	Partition                  int32
	From, Target               []int32
	Cancelled, Driven          bool
	EntriesBehind, BytesBehind int64
	Steps                      []string
	// BytesMoved is how far the new replicas' lag shrank since this
	// metadata primary drove the move; EtaMs the time left at the recent
	// catch-up rate (-1: unknown).
	BytesMoved, EtaMs int64
}

// DrainStatus is one node marked draining, as the metadata primary sees
// it: the replicas the metadata still places on it, the partitions it
// leads, and the moves in progress that take replicas off it. Done: it
// holds nothing.
type DrainStatus struct {
	Node, Replacement           int32
	Replicas, Primaries, Moving int32
	Done                        bool
}

// ReassignResult lists the moves started, checked, cancelled or in
// progress, and the nodes draining.
type ReassignResult struct {
	Moves  []ReassignStatus
	Drains []DrainStatus
}
