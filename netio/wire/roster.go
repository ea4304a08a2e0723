package wire

// ChangeRoster actions.
const (
	// RosterAdd records a new node (joining); the metadata group then
	// adds it as a learner and promotes it once caught up.
	RosterAdd uint8 = 0
	// RosterRemove starts removing a node that holds no replica
	// (Member.ID only).
	RosterRemove uint8 = 1
	// RosterList lists the roster (Member is ignored); any node answers.
	RosterList uint8 = 2
)

// RosterNodesMax bounds the members of a ChangeRoster response (the
// roster's own bound: node ids are 1..32).
const RosterNodesMax = 32

// RosterMember is one roster node.
//
//	RosterMember:
//	node_id          int32
//	client_addr      string
//	replication_addr string
//	http_addr        string   "" when none
//	kafka_addr       string   "" when none
//	rack             string   "" when none
//	state            string   joining, active or leaving ("" in a request)
type RosterMember struct {
	ID                                               int32
	ClientAddr, ReplicationAddr, HTTPAddr, KafkaAddr string
	Rack, State                                      string
}

const rosterMemberMinBytes = 4 + 6*2

// rosterStateBytesMax bounds a member state's name.
const rosterStateBytesMax = 16

func (m *RosterMember) append(dst []byte) []byte {
	dst = be.AppendUint32(dst, uint32(m.ID))
	for _, s := range []string{m.ClientAddr, m.ReplicationAddr, m.HTTPAddr, m.KafkaAddr, m.Rack, m.State} {
		dst = appendString(dst, s)
	}
	return dst
}

func (m *RosterMember) decode(d *decoder) {
	m.ID = d.i32("member.node_id")
	d.str("member.client_addr", AddressBytesMax, &m.ClientAddr)
	d.str("member.replication_addr", AddressBytesMax, &m.ReplicationAddr)
	d.str("member.http_addr", AddressBytesMax, &m.HTTPAddr)
	d.str("member.kafka_addr", AddressBytesMax, &m.KafkaAddr)
	d.str("member.rack", RackBytesMax, &m.Rack)
	d.str("member.state", rosterStateBytesMax, &m.State)
}

// ChangeRosterRequest adds a node to the roster, starts removing a
// drained one (metadata primary), or lists the roster (any node).
//
// Body v0:
//
//	action    uint8   0 add, 1 remove, 2 list
//	member    RosterMember   add: the new node; remove: node_id
type ChangeRosterRequest struct {
	Action uint8
	Member RosterMember
}

func (*ChangeRosterRequest) isRequest() {}

// APIKey returns APIChangeRoster.
func (*ChangeRosterRequest) APIKey() APIKey { return APIChangeRoster }

// AppendBody encodes the body.
func (r *ChangeRosterRequest) AppendBody(dst []byte, version uint16) []byte {
	dst = append(dst, r.Action)
	return r.Member.append(dst)
}

// DecodeBody decodes the body.
func (r *ChangeRosterRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIChangeRoster, version, false)
	r.Action = d.u8("action")
	if r.Action > RosterList {
		d.failf("action", "%d is not 0 (add), 1 (remove) or 2 (list)", r.Action)
	}
	r.Member.decode(&d)
	return d.done()
}

// ChangeRosterResponse is the roster after the change (or as listed), by
// node id.
//
// Body v0:
//
//	members   array of RosterMember
type ChangeRosterResponse struct {
	Members []RosterMember
}

func (*ChangeRosterResponse) isResponse() {}

// APIKey returns APIChangeRoster.
func (*ChangeRosterResponse) APIKey() APIKey { return APIChangeRoster }

// AppendBody encodes the body.
func (r *ChangeRosterResponse) AppendBody(dst []byte, version uint16) []byte {
	dst = appendCount(dst, len(r.Members))
	for i := range r.Members {
		dst = r.Members[i].append(dst)
	}
	return dst
}

// DecodeBody decodes the body.
func (r *ChangeRosterResponse) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIChangeRoster, version, true)
	r.Members = grow(r.Members, d.count("members", RosterNodesMax, rosterMemberMinBytes))
	for i := range r.Members {
		r.Members[i].decode(&d)
	}
	return d.done()
}
