package service

// Roster actions (RosterRequest.Action).
const (
	RosterAdd    = 0
	RosterRemove = 1
	RosterList   = 2
)

// RosterRequest adds a node to the roster, starts removing one (Member.ID
// only), or lists the roster (docs/design/membership.md). A change is
// made on the metadata primary; a list is answered by any node from its
// applied metadata.
type RosterRequest struct {
	Action int
	Member RosterMember
}

// RosterMember is one roster node as recorded in the metadata.
type RosterMember struct {
	ID                                               int32
	ClientAddr, ReplicationAddr, HTTPAddr, KafkaAddr string
	Rack                                             string
	// State is joining, active or leaving (ignored in a request).
	State string
}

// RosterResult is the roster after the change (or as listed), by id.
type RosterResult struct {
	Members []RosterMember
}
