package service

// Reassign actions (ReassignRequest.Action).
const (
	ReassignStart  = 0
	ReassignCancel = 1
	ReassignList   = 2
)

// ReassignRequest starts (checks, with DryRun), cancels or lists replica
// moves (metadata primary).
type ReassignRequest struct {
	Action int
	DryRun bool
	Moves  []ReassignMove
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
}

// ReassignResult lists the moves started, checked, cancelled or in
// progress.
type ReassignResult struct {
	Moves []ReassignStatus
}
