package wire

// Reassign actions.
const (
	// ReassignStart starts (or with DryRun only checks) every move of the
	// request; the plan is checked whole before any move starts.
	ReassignStart uint8 = 0
	// ReassignCancel turns every named move back to the replicas it
	// started from (Replicas is ignored).
	ReassignCancel uint8 = 1
	// ReassignList lists the moves in progress (Moves is ignored).
	ReassignList uint8 = 2
)

// ReassignMovesMax bounds the moves of one Reassign request or response
// (the metadata's bound on moves recorded at once).
const ReassignMovesMax = 4096

// ReassignRequest starts, cancels or lists replica moves (metadata
// primary).
//
// Body v0:
//
//	action    uint8   0 start, 1 cancel, 2 list
//	dry_run   bool    start: check the plan, start nothing
//	moves     array of ReassignMove
//
//	ReassignMove:
//	topic     string
//	partition int32
//	replicas  array of int32   the new replica list, preferred primary first
type ReassignRequest struct {
	Action uint8
	DryRun bool
	Moves  []ReassignMove
}

// ReassignMove is one partition's new replica list.
type ReassignMove struct {
	Topic     string
	Partition int32
	Replicas  []int32
}

func (*ReassignRequest) isRequest() {}

// APIKey returns APIReassign.
func (*ReassignRequest) APIKey() APIKey { return APIReassign }

// AppendBody encodes the body.
func (r *ReassignRequest) AppendBody(dst []byte, version uint16) []byte {
	dst = append(dst, r.Action)
	dst = appendBool(dst, r.DryRun)
	dst = appendCount(dst, len(r.Moves))
	for _, m := range r.Moves {
		dst = appendString(dst, m.Topic)
		dst = be.AppendUint32(dst, uint32(m.Partition))
		dst = appendInt32s(dst, m.Replicas)
	}
	return dst
}

// DecodeBody decodes the body.
func (r *ReassignRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIReassign, version, false)
	r.Action = d.u8("action")
	if r.Action > ReassignList {
		d.failf("action", "%d is not 0 (start), 1 (cancel) or 2 (list)", r.Action)
	}
	r.DryRun = d.boolean("dry_run")
	r.Moves = grow(r.Moves, d.count("moves", ReassignMovesMax, 2+4+4))
	for i := range r.Moves {
		m := &r.Moves[i]
		d.str("moves[].topic", TopicNameBytesMax, &m.Topic)
		m.Partition = d.i32("moves[].partition")
		m.Replicas = d.int32s("moves[].replicas", ReplicationFactorMax, m.Replicas)
	}
	return d.done()
}

// ReassignResponse lists moves: those started or checked (start), turned
// back (cancel), or in progress (list).
//
// Body v0:
//
//	moves     array of ReassignStatus
//
//	ReassignStatus:
//	topic          string
//	partition      int32
//	from           array of int32   the replicas the move started from
//	target         array of int32   the replicas it moves to
//	cancelled      bool
//	driven         bool    among the cluster.reassign_concurrency moving now
//	entries_behind int64   the learner being caught up (0: none)
//	bytes_behind   int64
//	steps          array of string   recorded steps, "learner_added 4"
type ReassignResponse struct {
	Moves []ReassignStatus
}

// ReassignStatus is one move.
type ReassignStatus struct {
	Topic                      string
	Partition                  int32
	From, Target               []int32
	Cancelled, Driven          bool
	EntriesBehind, BytesBehind int64
	Steps                      []string
}

func (*ReassignResponse) isResponse() {}

// APIKey returns APIReassign.
func (*ReassignResponse) APIKey() APIKey { return APIReassign }

// reassignStepsMax bounds one move's recorded steps (three per node of
// its two lists).
const reassignStepsMax = 6 * ReplicationFactorMax

// AppendBody encodes the body.
func (r *ReassignResponse) AppendBody(dst []byte, version uint16) []byte {
	dst = appendCount(dst, len(r.Moves))
	for _, m := range r.Moves {
		dst = appendString(dst, m.Topic)
		dst = be.AppendUint32(dst, uint32(m.Partition))
		dst = appendInt32s(dst, m.From)
		dst = appendInt32s(dst, m.Target)
		dst = appendBool(dst, m.Cancelled)
		dst = appendBool(dst, m.Driven)
		dst = be.AppendUint64(dst, uint64(m.EntriesBehind))
		dst = be.AppendUint64(dst, uint64(m.BytesBehind))
		dst = appendCount(dst, len(m.Steps))
		for _, s := range m.Steps {
			dst = appendString(dst, s)
		}
	}
	return dst
}

// DecodeBody decodes the body.
func (r *ReassignResponse) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIReassign, version, true)
	r.Moves = grow(r.Moves, d.count("moves", ReassignMovesMax, 2+4+4+4+1+1+8+8+4))
	for i := range r.Moves {
		m := &r.Moves[i]
		d.str("moves[].topic", TopicNameBytesMax, &m.Topic)
		m.Partition = d.i32("moves[].partition")
		m.From = d.int32s("moves[].from", ReplicationFactorMax, m.From)
		m.Target = d.int32s("moves[].target", ReplicationFactorMax, m.Target)
		m.Cancelled = d.boolean("moves[].cancelled")
		m.Driven = d.boolean("moves[].driven")
		m.EntriesBehind = d.i64("moves[].entries_behind")
		m.BytesBehind = d.i64("moves[].bytes_behind")
		m.Steps = grow(m.Steps, d.count("moves[].steps", reassignStepsMax, 2))
		for j := range m.Steps {
			d.str("moves[].steps[]", 64, &m.Steps[j])
		}
	}
	return d.done()
}
