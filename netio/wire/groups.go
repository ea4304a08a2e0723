package wire

// Consumer groups (docs/protocol.md "Consumer groups"): Kafka's classic
// group protocol in the native encoding. A member finds the group's
// coordinator (FindCoordinator), joins (JoinGroup: parks until the
// rebalance completes; the leader gets every member's metadata), syncs
// (SyncGroup: the leader hands out the assignment, each member gets
// its own), heartbeats within its session timeout, commits and fetches
// the group's offsets, and leaves. Every call but FindCoordinator and
// ListGroups goes to the coordinator; another node answers
// NOT_COORDINATOR with a hint naming it. Member metadata and
// assignments are opaque to the server; the Go SDK writes them in
// Kafka's consumer protocol layout, so Kafka and native members can
// share a group.

// Group bounds.
const (
	// MemberIDBytesMax bounds a member id (Kafka clients' ids are their
	// client id and a UUID).
	MemberIDBytesMax = 1024
	// GroupProtocolNameBytesMax bounds a protocol type or assignor name.
	GroupProtocolNameBytesMax = 255
	// GroupProtocolsMax bounds the assignors one member offers.
	GroupProtocolsMax = 64
	// GroupMembersMax bounds a group's members in one message (the
	// coordinator's own bound is 1000).
	GroupMembersMax = 1 << 12
	// GroupMetadataBytesMax bounds one member's metadata or assignment.
	GroupMetadataBytesMax = 1 << 20
	// GroupsMax bounds the groups one ListGroups answers.
	GroupsMax = 1 << 17
	// GroupStatesMax bounds a ListGroups filter.
	GroupStatesMax = 8
)

// FindCoordinatorRequest asks which node coordinates a group; any node
// answers.
//
// Body v0:
//
//	group  string
type FindCoordinatorRequest struct {
	Group string
}

func (*FindCoordinatorRequest) isRequest() {}

// APIKey returns APIFindCoordinator.
func (*FindCoordinatorRequest) APIKey() APIKey { return APIFindCoordinator }

// AppendBody encodes the body.
func (r *FindCoordinatorRequest) AppendBody(dst []byte, version uint16) []byte {
	return appendString(dst, r.Group)
}

// DecodeBody decodes the body.
func (r *FindCoordinatorRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIFindCoordinator, version, false)
	d.str("group", ConsumerNameBytesMax, &r.Group)
	return d.done()
}

// FindCoordinatorResponse names the coordinator.
//
// Body v0:
//
//	node_id        int32
//	address        string   its client address (HOST:PORT)
//	kafka_address  string   its Kafka address, "" when it has none
type FindCoordinatorResponse struct {
	NodeID       int32
	Address      string
	KafkaAddress string
}

func (*FindCoordinatorResponse) isResponse() {}

// APIKey returns APIFindCoordinator.
func (*FindCoordinatorResponse) APIKey() APIKey { return APIFindCoordinator }

// AppendBody encodes the body.
func (r *FindCoordinatorResponse) AppendBody(dst []byte, version uint16) []byte {
	dst = be.AppendUint32(dst, uint32(r.NodeID))
	dst = appendString(dst, r.Address)
	return appendString(dst, r.KafkaAddress)
}

// DecodeBody decodes the body.
func (r *FindCoordinatorResponse) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIFindCoordinator, version, true)
	r.NodeID = d.i32("node_id")
	d.str("address", AddressBytesMax, &r.Address)
	d.str("kafka_address", AddressBytesMax, &r.KafkaAddress)
	return d.done()
}

// GroupProtocol is one assignor a member offers.
//
//	name      string
//	metadata  bytes    the member's subscription, opaque to the server
type GroupProtocol struct {
	Name     string
	Metadata []byte
}

// JoinGroupRequest joins (or rejoins) a member; the answer comes when the
// group's rebalance completes (at most the rebalance timeout).
//
// Body v0:
//
//	group                 string
//	member_id             string   "" at the first join
//	instance_id           string   "" for a dynamic member; else static (KIP-345)
//	protocol_type         string   "consumer" for consumers
//	session_timeout_ms    uint32
//	rebalance_timeout_ms  uint32
//	protocols             array of GroupProtocol, preferred first
type JoinGroupRequest struct {
	Group, MemberID, InstanceID string
	ProtocolType                string
	SessionTimeoutMs            uint32
	RebalanceTimeoutMs          uint32
	Protocols                   []GroupProtocol
}

func (*JoinGroupRequest) isRequest() {}

// APIKey returns APIJoinGroup.
func (*JoinGroupRequest) APIKey() APIKey { return APIJoinGroup }

// AppendBody encodes the body.
func (r *JoinGroupRequest) AppendBody(dst []byte, version uint16) []byte {
	dst = appendString(dst, r.Group)
	dst = appendString(dst, r.MemberID)
	dst = appendString(dst, r.InstanceID)
	dst = appendString(dst, r.ProtocolType)
	dst = be.AppendUint32(dst, r.SessionTimeoutMs)
	dst = be.AppendUint32(dst, r.RebalanceTimeoutMs)
	dst = appendCount(dst, len(r.Protocols))
	for _, p := range r.Protocols {
		dst = appendString(dst, p.Name)
		dst = appendBytes(dst, p.Metadata)
	}
	return dst
}

// DecodeBody decodes the body; metadata aliases body.
func (r *JoinGroupRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIJoinGroup, version, false)
	d.str("group", ConsumerNameBytesMax, &r.Group)
	d.str("member_id", MemberIDBytesMax, &r.MemberID)
	d.str("instance_id", MemberIDBytesMax, &r.InstanceID)
	d.str("protocol_type", GroupProtocolNameBytesMax, &r.ProtocolType)
	r.SessionTimeoutMs = d.u32("session_timeout_ms")
	r.RebalanceTimeoutMs = d.u32("rebalance_timeout_ms")
	r.Protocols = grow(r.Protocols, d.count("protocols", GroupProtocolsMax, 2+4))
	for i := range r.Protocols {
		p := &r.Protocols[i]
		d.str("protocols[].name", GroupProtocolNameBytesMax, &p.Name)
		p.Metadata = d.bytes32("protocols[].metadata", GroupMetadataBytesMax)
	}
	return d.done()
}

// GroupMember is a member as the leader sees it at a join.
//
//	member_id    string
//	instance_id  string
//	metadata     bytes   its metadata for the chosen protocol
type GroupMember struct {
	MemberID, InstanceID string
	Metadata             []byte
}

// JoinGroupResponse answers a join.
//
// Body v0:
//
//	generation     int32
//	protocol_type  string
//	protocol       string   the assignor chosen
//	leader_id      string
//	member_id      string   this member's id (keep it for every later call)
//	members        array of GroupMember   the leader's answer only; empty for the others
type JoinGroupResponse struct {
	Generation             int32
	ProtocolType, Protocol string
	LeaderID, MemberID     string
	Members                []GroupMember
}

func (*JoinGroupResponse) isResponse() {}

// APIKey returns APIJoinGroup.
func (*JoinGroupResponse) APIKey() APIKey { return APIJoinGroup }

// AppendBody encodes the body.
func (r *JoinGroupResponse) AppendBody(dst []byte, version uint16) []byte {
	dst = be.AppendUint32(dst, uint32(r.Generation))
	dst = appendString(dst, r.ProtocolType)
	dst = appendString(dst, r.Protocol)
	dst = appendString(dst, r.LeaderID)
	dst = appendString(dst, r.MemberID)
	dst = appendCount(dst, len(r.Members))
	for _, m := range r.Members {
		dst = appendString(dst, m.MemberID)
		dst = appendString(dst, m.InstanceID)
		dst = appendBytes(dst, m.Metadata)
	}
	return dst
}

// DecodeBody decodes the body.
func (r *JoinGroupResponse) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIJoinGroup, version, true)
	r.Generation = d.i32("generation")
	d.str("protocol_type", GroupProtocolNameBytesMax, &r.ProtocolType)
	d.str("protocol", GroupProtocolNameBytesMax, &r.Protocol)
	d.str("leader_id", MemberIDBytesMax, &r.LeaderID)
	d.str("member_id", MemberIDBytesMax, &r.MemberID)
	r.Members = grow(r.Members, d.count("members", GroupMembersMax, 2+2+4))
	for i := range r.Members {
		m := &r.Members[i]
		d.str("members[].member_id", MemberIDBytesMax, &m.MemberID)
		d.str("members[].instance_id", MemberIDBytesMax, &m.InstanceID)
		m.Metadata = d.bytes32("members[].metadata", GroupMetadataBytesMax)
	}
	return d.done()
}

// GroupAssignment is one member's assignment from the leader.
//
//	member_id   string
//	assignment  bytes
type GroupAssignment struct {
	MemberID   string
	Assignment []byte
}

// SyncGroupRequest ends a member's rebalance; the leader's carries every
// member's assignment, and a follower's waits for it.
//
// Body v0:
//
//	group        string
//	member_id    string
//	generation   int32
//	assignments  array of GroupAssignment   the leader's only
type SyncGroupRequest struct {
	Group, MemberID string
	Generation      int32
	Assignments     []GroupAssignment
}

func (*SyncGroupRequest) isRequest() {}

// APIKey returns APISyncGroup.
func (*SyncGroupRequest) APIKey() APIKey { return APISyncGroup }

// AppendBody encodes the body.
func (r *SyncGroupRequest) AppendBody(dst []byte, version uint16) []byte {
	dst = appendString(dst, r.Group)
	dst = appendString(dst, r.MemberID)
	dst = be.AppendUint32(dst, uint32(r.Generation))
	dst = appendCount(dst, len(r.Assignments))
	for _, a := range r.Assignments {
		dst = appendString(dst, a.MemberID)
		dst = appendBytes(dst, a.Assignment)
	}
	return dst
}

// DecodeBody decodes the body; assignments alias body.
func (r *SyncGroupRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APISyncGroup, version, false)
	d.str("group", ConsumerNameBytesMax, &r.Group)
	d.str("member_id", MemberIDBytesMax, &r.MemberID)
	r.Generation = d.i32("generation")
	r.Assignments = grow(r.Assignments, d.count("assignments", GroupMembersMax, 2+4))
	for i := range r.Assignments {
		a := &r.Assignments[i]
		d.str("assignments[].member_id", MemberIDBytesMax, &a.MemberID)
		a.Assignment = d.bytes32("assignments[].assignment", GroupMetadataBytesMax)
	}
	return d.done()
}

// SyncGroupResponse is the member's assignment.
//
// Body v0:
//
//	protocol_type  string
//	protocol       string
//	assignment     bytes
type SyncGroupResponse struct {
	ProtocolType, Protocol string
	Assignment             []byte
}

func (*SyncGroupResponse) isResponse() {}

// APIKey returns APISyncGroup.
func (*SyncGroupResponse) APIKey() APIKey { return APISyncGroup }

// AppendBody encodes the body.
func (r *SyncGroupResponse) AppendBody(dst []byte, version uint16) []byte {
	dst = appendString(dst, r.ProtocolType)
	dst = appendString(dst, r.Protocol)
	return appendBytes(dst, r.Assignment)
}

// DecodeBody decodes the body.
func (r *SyncGroupResponse) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APISyncGroup, version, true)
	d.str("protocol_type", GroupProtocolNameBytesMax, &r.ProtocolType)
	d.str("protocol", GroupProtocolNameBytesMax, &r.Protocol)
	r.Assignment = d.bytes32("assignment", GroupMetadataBytesMax)
	return d.done()
}

// HeartbeatRequest keeps a member's session; REBALANCE_IN_PROGRESS tells
// it to rejoin.
//
// Body v0:
//
//	group       string
//	member_id   string
//	generation  int32
type HeartbeatRequest struct {
	Group, MemberID string
	Generation      int32
}

func (*HeartbeatRequest) isRequest() {}

// APIKey returns APIHeartbeat.
func (*HeartbeatRequest) APIKey() APIKey { return APIHeartbeat }

// AppendBody encodes the body.
func (r *HeartbeatRequest) AppendBody(dst []byte, version uint16) []byte {
	dst = appendString(dst, r.Group)
	dst = appendString(dst, r.MemberID)
	return be.AppendUint32(dst, uint32(r.Generation))
}

// DecodeBody decodes the body.
func (r *HeartbeatRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIHeartbeat, version, false)
	d.str("group", ConsumerNameBytesMax, &r.Group)
	d.str("member_id", MemberIDBytesMax, &r.MemberID)
	r.Generation = d.i32("generation")
	return d.done()
}

// HeartbeatResponse: the session was kept. Body v0 is empty.
type HeartbeatResponse struct{}

func (*HeartbeatResponse) isResponse() {}

// APIKey returns APIHeartbeat.
func (*HeartbeatResponse) APIKey() APIKey { return APIHeartbeat }

// AppendBody encodes the (empty) body.
func (r *HeartbeatResponse) AppendBody(dst []byte, version uint16) []byte { return dst }

// DecodeBody checks that the body is empty.
func (r *HeartbeatResponse) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIHeartbeat, version, true)
	return d.done()
}

// LeavingMember names a member that leaves: by member id, or, with no
// member id, the static member of instance_id.
//
//	member_id    string
//	instance_id  string
type LeavingMember struct {
	MemberID, InstanceID string
}

// LeaveGroupRequest removes members at once (their partitions move
// without waiting for their sessions to run out).
//
// Body v0:
//
//	group    string
//	members  array of LeavingMember
type LeaveGroupRequest struct {
	Group   string
	Members []LeavingMember
}

func (*LeaveGroupRequest) isRequest() {}

// APIKey returns APILeaveGroup.
func (*LeaveGroupRequest) APIKey() APIKey { return APILeaveGroup }

// AppendBody encodes the body.
func (r *LeaveGroupRequest) AppendBody(dst []byte, version uint16) []byte {
	dst = appendString(dst, r.Group)
	dst = appendCount(dst, len(r.Members))
	for _, m := range r.Members {
		dst = appendString(dst, m.MemberID)
		dst = appendString(dst, m.InstanceID)
	}
	return dst
}

// DecodeBody decodes the body.
func (r *LeaveGroupRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APILeaveGroup, version, false)
	d.str("group", ConsumerNameBytesMax, &r.Group)
	r.Members = grow(r.Members, d.count("members", GroupMembersMax, 2+2))
	for i := range r.Members {
		m := &r.Members[i]
		d.str("members[].member_id", MemberIDBytesMax, &m.MemberID)
		d.str("members[].instance_id", MemberIDBytesMax, &m.InstanceID)
	}
	return d.done()
}

// MemberResult is one leaving member's outcome.
//
//	member_id   string
//	error_code  int16   0, or UNKNOWN_MEMBER
type MemberResult struct {
	MemberID  string
	ErrorCode int16
}

// LeaveGroupResponse answers one result per member, in request order.
//
// Body v0:
//
//	results  array of MemberResult
type LeaveGroupResponse struct {
	Results []MemberResult
}

func (*LeaveGroupResponse) isResponse() {}

// APIKey returns APILeaveGroup.
func (*LeaveGroupResponse) APIKey() APIKey { return APILeaveGroup }

// AppendBody encodes the body.
func (r *LeaveGroupResponse) AppendBody(dst []byte, version uint16) []byte {
	dst = appendCount(dst, len(r.Results))
	for _, m := range r.Results {
		dst = appendString(dst, m.MemberID)
		dst = be.AppendUint16(dst, uint16(m.ErrorCode))
	}
	return dst
}

// DecodeBody decodes the body.
func (r *LeaveGroupResponse) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APILeaveGroup, version, true)
	r.Results = grow(r.Results, d.count("results", GroupMembersMax, 2+2))
	for i := range r.Results {
		m := &r.Results[i]
		d.str("results[].member_id", MemberIDBytesMax, &m.MemberID)
		m.ErrorCode = d.i16("results[].error_code")
	}
	return d.done()
}
