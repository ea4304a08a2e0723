package wire

// Reassign actions.
const (
	// ReassignStart starts (or with DryRun only checks) every move of the
	// request; the plan is checked whole before any move starts.
	ReassignStart uint8 = 0
	// ReassignCancel turns every named move back to the replicas it
	// started from (Replicas is ignored).
	ReassignCancel uint8 = 1
	// ReassignList lists the moves in progress (Moves is ignored) and,
	// from v1, the nodes draining.
	ReassignList uint8 = 2
	// ReassignDrain (v1) marks Node draining: the metadata primary moves
	// every replica and primary off it, a few at a time.
	ReassignDrain uint8 = 3
	// ReassignUndrain (v1) lifts Node's draining mark.
	ReassignUndrain uint8 = 4
	// ReassignReplace (v1) moves every replica of Node (gone for good)
	// onto Replacement, which takes its place in each replica list.
	ReassignReplace uint8 = 5
)

// ReassignMovesMax bounds the moves of one Reassign request or response
// (the metadata's bound on moves recorded at once).
const ReassignMovesMax = 4096

// ReassignRequest starts, cancels or lists replica moves (metadata
// primary).
//
// Body v0 and v1 (v1 adds actions 3..5 and the last three fields):
//
//	action    uint8   0 start, 1 cancel, 2 list, 3 drain, 4 undrain, 5 replace
//	dry_run   bool    start: check the plan, start nothing
//	moves     array of ReassignMove
//	node                       int32  v1: the node a drain, undrain or replace names
//	replacement                int32  v1: replace: the node taking its place
//	throttle_bytes_per_second  int64  v1: start: catch-up bytes/s per node (0: the nodes' setting)
//
//	ReassignMove:
//	topic     string
//	partition int32
//	replicas  array of int32   the new replica list, preferred primary first
type ReassignRequest struct {
	Action                 uint8
	DryRun                 bool
	Moves                  []ReassignMove
	Node, Replacement      int32
	ThrottleBytesPerSecond int64
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
	if version >= 1 {
		dst = be.AppendUint32(dst, uint32(r.Node))
		dst = be.AppendUint32(dst, uint32(r.Replacement))
		dst = be.AppendUint64(dst, uint64(r.ThrottleBytesPerSecond))
	}
	return dst
}

// DecodeBody decodes the body.
func (r *ReassignRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIReassign, version, false)
	r.Action = d.u8("action")
	if version == 0 && r.Action > ReassignList {
		d.failf("action", "%d is not 0 (start), 1 (cancel) or 2 (list)", r.Action)
	}
	if r.Action > ReassignReplace {
		d.failf("action", "%d is not 0 (start), 1 (cancel), 2 (list), 3 (drain), 4 (undrain) or 5 (replace)", r.Action)
	}
	r.DryRun = d.boolean("dry_run")
	r.Moves = grow(r.Moves, d.count("moves", ReassignMovesMax, 2+4+4))
	for i := range r.Moves {
		m := &r.Moves[i]
		d.str("moves[].topic", TopicNameBytesMax, &m.Topic)
		m.Partition = d.i32("moves[].partition")
		m.Replicas = d.int32s("moves[].replicas", ReplicationFactorMax, m.Replicas)
	}
	if version >= 1 {
		r.Node = d.i32("node")
		r.Replacement = d.i32("replacement")
		r.ThrottleBytesPerSecond = d.i64("throttle_bytes_per_second")
		if r.ThrottleBytesPerSecond < 0 {
			d.failf("throttle_bytes_per_second", "%d is negative", r.ThrottleBytesPerSecond)
		}
	}
	return d.done()
}

// ReassignResponse lists moves: those started or checked (start), turned
// back (cancel), or in progress (list).
//
// Body v0 and v1 (v1 adds bytes_moved and eta_ms to each move, and the
// drains):
//
//	moves     array of ReassignStatus
//	drains    array of DrainStatus   v1
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
//	bytes_moved    int64   v1: how far the new replicas' lag shrank
//	eta_ms         int64   v1: time left at the recent catch-up rate; -1 unknown
//
//	DrainStatus:
//	node           int32
//	replacement    int32   0: chosen per partition (drain)
//	replicas       int32   partitions the metadata still places on the node
//	primaries      int32   partitions it leads
//	moving         int32   moves in progress off it
//	done           bool    it holds nothing
type ReassignResponse struct {
	Moves  []ReassignStatus
	Drains []DrainStatus
}

// DrainStatus is one node marked draining.
type DrainStatus struct {
	Node, Replacement           int32
	Replicas, Primaries, Moving int32
	Done                        bool
}

// ReassignStatus is one move.
type ReassignStatus struct {
	Topic                      string
	Partition                  int32
	From, Target               []int32
	Cancelled, Driven          bool
	EntriesBehind, BytesBehind int64
	Steps                      []string
	BytesMoved, EtaMs          int64
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
		if version >= 1 {
			dst = be.AppendUint64(dst, uint64(m.BytesMoved))
			dst = be.AppendUint64(dst, uint64(m.EtaMs))
		}
	}
	if version >= 1 {
		dst = appendCount(dst, len(r.Drains))
		for _, s := range r.Drains {
			dst = be.AppendUint32(dst, uint32(s.Node))
			dst = be.AppendUint32(dst, uint32(s.Replacement))
			dst = be.AppendUint32(dst, uint32(s.Replicas))
			dst = be.AppendUint32(dst, uint32(s.Primaries))
			dst = be.AppendUint32(dst, uint32(s.Moving))
			dst = appendBool(dst, s.Done)
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
		if version >= 1 {
			m.BytesMoved = d.i64("moves[].bytes_moved")
			m.EtaMs = d.i64("moves[].eta_ms")
		}
	}
	if version >= 1 {
		r.Drains = grow(r.Drains, d.count("drains", NodesMax, 4*5+1))
		for i := range r.Drains {
			s := &r.Drains[i]
			s.Node = d.i32("drains[].node")
			s.Replacement = d.i32("drains[].replacement")
			s.Replicas = d.i32("drains[].replicas")
			s.Primaries = d.i32("drains[].primaries")
			s.Moving = d.i32("drains[].moving")
			s.Done = d.boolean("drains[].done")
		}
	}
	return d.done()
}
