package raftlite

import "fmt"

// ProgressState is how the leader replicates to one follower.
type ProgressState uint8

// Progress states.
const (
	// ProgressProbe: the leader does not know where the follower's log
	// matches; it sends one MsgApp and waits for the answer (or the next
	// heartbeat response) before sending another.
	ProgressProbe ProgressState = iota
	// ProgressReplicate: the follower matches; the leader streams MsgApps,
	// optimistically advancing next, within the in-flight bounds.
	ProgressReplicate
	// ProgressReset: the follower needs entries below the leader's log
	// start; a MsgReset is outstanding.
	ProgressReset
)

var progressStateNames = [...]string{"probe", "replicate", "reset"}

// String returns the state's name: probe, replicate or reset.
func (s ProgressState) String() string {
	if int(s) < len(progressStateNames) {
		return progressStateNames[s]
	}
	return fmt.Sprintf("ProgressState(%d)", s)
}

// inflight is one unacknowledged MsgApp: its last offset and entry bytes.
type inflight struct {
	last  int64
	bytes int64
}

// progress is the leader's view of one member (itself included).
//
// Invariants: -1 <= match < next; next is a batch base in the leader's log
// (or its end); inflightBytes is the sum of inflights' bytes;
// len(inflights) <= InflightMsgsMax.
type progress struct {
	id    NodeID
	state ProgressState
	// match is the highest offset known to be durable on the member and
	// to match the leader's log.
	match int64
	// next is the first offset to send.
	next int64
	// probeSent pauses a probing follower until an answer arrives;
	// probeLast and probeBytes describe the entries that probe carried
	// (probeLast < next when it carried none).
	probeSent  bool
	probeLast  int64
	probeBytes int64
	// resetAt is the offset before the log start sent in the outstanding
	// MsgReset, and resetSentTick when it was sent (leader ticks).
	resetAt       int64
	resetSentTick int64
	// recentActive is set by any message from the member and cleared at
	// each check-quorum interval.
	recentActive bool
	// heartbeatAnswered says the member answered the last heartbeat round:
	// proof, unlike recentActive (which a wake-up grants), that it is
	// there to be asked to quiesce.
	heartbeatAnswered bool
	// commit is the member's commit as last reported (heartbeat response);
	// the leader quiesces only when every member has caught up.
	commit    int64
	inflights []inflight
	// inflightBytes is the sum of inflights' bytes.
	inflightBytes int64
}

// paused reports whether no MsgApp may be sent now.
func (p *progress) paused(lim *Limits) bool {
	switch p.state {
	case ProgressProbe:
		return p.probeSent
	case ProgressReplicate:
		return len(p.inflights) >= int(lim.InflightMsgsMax) || p.inflightBytes >= lim.InflightBytesMax
	default:
		return true
	}
}

func (p *progress) becomeProbe() {
	p.state = ProgressProbe
	p.probeSent = false
	p.next = p.match + 1
	p.inflights, p.inflightBytes = nil, 0
}

func (p *progress) becomeReplicate() {
	p.state = ProgressReplicate
	p.probeSent = false
	p.next = p.match + 1
	p.inflights, p.inflightBytes = nil, 0
}

// replicateAfterProbe leaves probe state after an acknowledgement of idx.
// When the acknowledgement comes from the probe's log position or later,
// the follower took the probe, and the entries it carried beyond idx are
// counted in flight instead of being sent again (were they lost after all,
// the next MsgApp is rejected and probing resumes).
func (p *progress) replicateAfterProbe(idx int64) {
	from, sent, last, bytes := p.next, p.probeSent, p.probeLast, p.probeBytes
	p.becomeReplicate()
	if sent && idx >= from-1 && last > p.match {
		p.next = last + 1
		p.inflights = []inflight{{last: last, bytes: bytes}}
		p.inflightBytes = bytes
	}
}

func (p *progress) becomeReset(at, tick int64) {
	p.state = ProgressReset
	p.probeSent = false
	p.resetAt, p.resetSentTick = at, tick
	p.next = at + 1
	p.inflights, p.inflightBytes = nil, 0
}

// sent records a MsgApp whose last entry ends at last and holds bytes.
func (p *progress) sent(last, bytes int64) {
	switch p.state {
	case ProgressProbe:
		p.probeSent = true
		p.probeLast, p.probeBytes = last, bytes
	case ProgressReplicate:
		if last >= p.next {
			p.next = last + 1
			p.inflights = append(p.inflights, inflight{last: last, bytes: bytes})
			p.inflightBytes += bytes
		}
	}
}

// acked records an accepted MsgAppResp for offset idx; it reports whether
// match moved.
func (p *progress) acked(idx int64) bool {
	if idx <= p.match {
		return false
	}
	p.match = idx
	if p.next <= idx {
		p.next = idx + 1
	}
	n := 0
	for n < len(p.inflights) && p.inflights[n].last <= idx {
		p.inflightBytes -= p.inflights[n].bytes
		n++
	}
	p.inflights = p.inflights[n:]
	if len(p.inflights) == 0 {
		p.inflights = nil
	}
	return true
}

// freeFirst releases the oldest in-flight MsgApp so that a follower whose
// acknowledgements were lost gets one more message per heartbeat.
func (p *progress) freeFirst() {
	if len(p.inflights) == 0 {
		return
	}
	p.inflightBytes -= p.inflights[0].bytes
	p.inflights = p.inflights[1:]
	if len(p.inflights) == 0 {
		p.inflights = nil
	}
}

// PeerProgress is the leader's view of one member, for routing ("in-sync
// replicas") and for the balancer's lag check.
type PeerProgress struct {
	ID NodeID
	// Match is the highest offset durable on the member and matching the
	// leader's log (-1 when unknown).
	Match int64
	// Next is the next offset the leader will send.
	Next  int64
	State ProgressState
	// Active says the member was heard from in the current check-quorum
	// interval.
	Active bool
	// InflightBytes is the unacknowledged entry bytes sent to the member.
	InflightBytes int64
	// Learner says the member does not vote (a learner, or the leader
	// itself once it removed itself).
	Learner bool
}
