package wire

import "strconv"

// APIKey identifies a request type. Keys are the wire format: never reused.
type APIKey uint16

// API keys. The data APIs (Produce, Fetch, ListOffsets) address exactly one
// partition, so one frame is served by exactly one shard.
const (
	APIHandshake         APIKey = 0
	APIProduce           APIKey = 1
	APIFetch             APIKey = 2
	APIListOffsets       APIKey = 3
	APIMetadata          APIKey = 4
	APICreateTopic       APIKey = 5
	APIDeleteTopic       APIKey = 6
	APIListTopics        APIKey = 7
	APIDescribeTopic     APIKey = 8
	APIAddPartitions     APIKey = 9
	APICommitOffsets     APIKey = 10
	APIFetchOffsets      APIKey = 11
	APIInitProducer      APIKey = 12
	APIClusterStatus     APIKey = 13
	APIMovePrimary       APIKey = 14
	APIRebalance         APIKey = 15
	APIDescribePartition APIKey = 16
	APIAuthenticate      APIKey = 17
	APIReassign          APIKey = 18
	// The consumer group APIs (groups.go, groups_admin.go).
	APIFindCoordinator    APIKey = 19
	APIJoinGroup          APIKey = 20
	APISyncGroup          APIKey = 21
	APIHeartbeat          APIKey = 22
	APILeaveGroup         APIKey = 23
	APICommitGroupOffsets APIKey = 24
	APIFetchGroupOffsets  APIKey = 25
	APIListGroups         APIKey = 26
	APIDescribeGroup      APIKey = 27
	APIDeleteGroup        APIKey = 28
	APIDeleteGroupOffsets APIKey = 29
	// Cluster membership (roster.go).
	APIChangeRoster APIKey = 30
	// APIHome moves the connection to the shard that owns a partition
	// (home.go): shard-aware connections.
	APIHome APIKey = 31
)

// APIVersion is one API's name and the versions this package speaks.
type APIVersion struct {
	Key  APIKey
	Name string
	// Min and Max bound the supported versions, inclusive.
	Min, Max uint16
	// Summary is one line for the docs.
	Summary string
}

// apiTable lists every API, indexed by key.
var apiTable = []APIVersion{
	{APIHandshake, "Handshake", 0, 0, "first frame on a connection: protocol version, identities, supported APIs"},
	{APIProduce, "Produce", 0, 0, "append one record batch to one partition"},
	{APIFetch, "Fetch", 0, 1, "read committed records of one partition from an offset (long poll)"},
	{APIListOffsets, "ListOffsets", 0, 0, "earliest, latest or by-timestamp offset of one partition"},
	{APIMetadata, "Metadata", 0, 0, "nodes, metadata primary and partition routes"},
	{APICreateTopic, "CreateTopic", 0, 0, "create a topic (metadata primary)"},
	{APIDeleteTopic, "DeleteTopic", 0, 0, "delete a topic (metadata primary)"},
	{APIListTopics, "ListTopics", 0, 0, "names, ids and sizes of every topic"},
	{APIDescribeTopic, "DescribeTopic", 0, 0, "one topic's routes and configuration"},
	{APIAddPartitions, "AddPartitions", 0, 0, "raise a topic's partition count (metadata primary)"},
	{APICommitOffsets, "CommitOffsets", 0, 0, "store a named consumer's offsets (coordinator)"},
	{APIFetchOffsets, "FetchOffsets", 0, 0, "read a named consumer's offsets (coordinator)"},
	{APIInitProducer, "InitProducer", 0, 0, "obtain an idempotent producer id and epoch"},
	{APIClusterStatus, "ClusterStatus", 0, 2, "nodes with their primary and replica counts (v1: and their Kafka addresses; v2: draining flags and the cluster id)"},
	{APIMovePrimary, "MovePrimary", 0, 0, "move one partition's primary to another replica (metadata primary)"},
	{APIRebalance, "Rebalance", 0, 1, "plan, or plan and start, primary moves toward balance (metadata primary)"},
	{APIDescribePartition, "DescribePartition", 0, 0, "one partition's route, offsets and replica progress"},
	{APIAuthenticate, "Authenticate", 0, 0, "one step of the SCRAM-SHA-256 exchange that authenticates a connection (after Handshake)"},
	{APIReassign, "Reassign", 0, 1, "start, cancel or list replica moves (metadata primary); v1: drain, undrain or replace a node, a throttle, progress"},
	{APIFindCoordinator, "FindCoordinator", 0, 0, "the node that coordinates a consumer group (any node)"},
	{APIJoinGroup, "JoinGroup", 0, 0, "join a consumer group; answers when its rebalance completes (coordinator)"},
	{APISyncGroup, "SyncGroup", 0, 0, "the leader hands out the assignment, each member gets its own (coordinator)"},
	{APIHeartbeat, "Heartbeat", 0, 0, "keep a group member's session (coordinator)"},
	{APILeaveGroup, "LeaveGroup", 0, 0, "remove members from a group at once (coordinator)"},
	{APICommitGroupOffsets, "CommitGroupOffsets", 0, 0, "a member's offset commit, checked against its generation (coordinator)"},
	{APIFetchGroupOffsets, "FetchGroupOffsets", 0, 0, "read a group's committed offsets (coordinator)"},
	{APIListGroups, "ListGroups", 0, 0, "the groups a node coordinates"},
	{APIDescribeGroup, "DescribeGroup", 0, 0, "one group's state, members and assignments (coordinator)"},
	{APIDeleteGroup, "DeleteGroup", 0, 0, "delete an empty group with its offsets (coordinator)"},
	{APIDeleteGroupOffsets, "DeleteGroupOffsets", 0, 0, "drop a group's offsets of some partitions (coordinator)"},
	{APIChangeRoster, "ChangeRoster", 0, 0, "add a node to the roster or remove a drained one (metadata primary), or list the roster"},
	{APIHome, "Home", 0, 0, "serve this connection on the shard that owns a partition (shard-aware connections)"},
}

// APIs returns the table of every API this package speaks, in key order.
func APIs() []APIVersion { return append([]APIVersion(nil), apiTable...) }

// String returns the API's name, or "api(N)" for an unknown key.
func (k APIKey) String() string {
	if int(k) < len(apiTable) {
		return apiTable[k].Name
	}
	if k == apiError {
		return "error body"
	}
	return "api(" + strconv.Itoa(int(k)) + ")"
}

// Versions returns the supported version range of key; ok is false for an
// unknown key.
func (k APIKey) Versions() (min, max uint16, ok bool) {
	if int(k) < len(apiTable) {
		return apiTable[k].Min, apiTable[k].Max, true
	}
	return 0, 0, false
}

// CheckVersion returns nil when this package speaks version of key, and
// otherwise an *ErrorResponse with UNSUPPORTED_VERSION and a precise message,
// which a server sends back instead of closing the connection.
func CheckVersion(key APIKey, version uint16) error {
	min, max, ok := key.Versions()
	if !ok {
		return Errorf(ErrUnsupportedVersion, "unknown API key %d (this server knows 0..%d)", key, len(apiTable)-1)
	}
	if version < min || version > max {
		return Errorf(ErrUnsupportedVersion, "%s version %d is outside the supported range %d..%d", key, version, min, max)
	}
	return nil
}

// Body is a request or response body: it knows its API and encodes and
// decodes itself for a given version.
type Body interface {
	// APIKey is the API the body belongs to.
	APIKey() APIKey
	// AppendBody appends the encoded body to dst and returns the result.
	// REQUIRES: version is supported (CheckVersion).
	AppendBody(dst []byte, version uint16) []byte
	// DecodeBody decodes body, which must be consumed exactly, into the
	// receiver, reusing its slices. Byte-slice fields alias body. Errors
	// decoding a request are *ErrorResponse with INVALID_REQUEST; errors
	// decoding a response wrap ErrMalformedResponse.
	DecodeBody(body []byte, version uint16) error
}

// Request is the body of a request frame.
type Request interface {
	Body
	isRequest()
}

// Response is the body of a successful response frame.
type Response interface {
	Body
	isResponse()
}

// NewRequest returns a new empty request body for key, or nil for an
// unknown key.
func NewRequest(key APIKey) Request {
	switch key {
	case APIHandshake:
		return new(HandshakeRequest)
	case APIProduce:
		return new(ProduceRequest)
	case APIFetch:
		return new(FetchRequest)
	case APIListOffsets:
		return new(ListOffsetsRequest)
	case APIMetadata:
		return new(MetadataRequest)
	case APICreateTopic:
		return new(CreateTopicRequest)
	case APIDeleteTopic:
		return new(DeleteTopicRequest)
	case APIListTopics:
		return new(ListTopicsRequest)
	case APIDescribeTopic:
		return new(DescribeTopicRequest)
	case APIAddPartitions:
		return new(AddPartitionsRequest)
	case APICommitOffsets:
		return new(CommitOffsetsRequest)
	case APIFetchOffsets:
		return new(FetchOffsetsRequest)
	case APIInitProducer:
		return new(InitProducerRequest)
	case APIClusterStatus:
		return new(ClusterStatusRequest)
	case APIMovePrimary:
		return new(MovePrimaryRequest)
	case APIRebalance:
		return new(RebalanceRequest)
	case APIDescribePartition:
		return new(DescribePartitionRequest)
	case APIAuthenticate:
		return new(AuthenticateRequest)
	case APIReassign:
		return new(ReassignRequest)
	case APIFindCoordinator:
		return new(FindCoordinatorRequest)
	case APIJoinGroup:
		return new(JoinGroupRequest)
	case APISyncGroup:
		return new(SyncGroupRequest)
	case APIHeartbeat:
		return new(HeartbeatRequest)
	case APILeaveGroup:
		return new(LeaveGroupRequest)
	case APICommitGroupOffsets:
		return new(CommitGroupOffsetsRequest)
	case APIFetchGroupOffsets:
		return new(FetchGroupOffsetsRequest)
	case APIListGroups:
		return new(ListGroupsRequest)
	case APIDescribeGroup:
		return new(DescribeGroupRequest)
	case APIDeleteGroup:
		return new(DeleteGroupRequest)
	case APIDeleteGroupOffsets:
		return new(DeleteGroupOffsetsRequest)
	case APIChangeRoster:
		return new(ChangeRosterRequest)
	case APIHome:
		return new(HomeRequest)
	}
	return nil
}

// NewResponse returns a new empty response body for key, or nil for an
// unknown key.
func NewResponse(key APIKey) Response {
	switch key {
	case APIHandshake:
		return new(HandshakeResponse)
	case APIProduce:
		return new(ProduceResponse)
	case APIFetch:
		return new(FetchResponse)
	case APIListOffsets:
		return new(ListOffsetsResponse)
	case APIMetadata:
		return new(MetadataResponse)
	case APICreateTopic:
		return new(CreateTopicResponse)
	case APIDeleteTopic:
		return new(DeleteTopicResponse)
	case APIListTopics:
		return new(ListTopicsResponse)
	case APIDescribeTopic:
		return new(DescribeTopicResponse)
	case APIAddPartitions:
		return new(AddPartitionsResponse)
	case APICommitOffsets:
		return new(CommitOffsetsResponse)
	case APIFetchOffsets:
		return new(FetchOffsetsResponse)
	case APIInitProducer:
		return new(InitProducerResponse)
	case APIClusterStatus:
		return new(ClusterStatusResponse)
	case APIMovePrimary:
		return new(MovePrimaryResponse)
	case APIRebalance:
		return new(RebalanceResponse)
	case APIDescribePartition:
		return new(DescribePartitionResponse)
	case APIAuthenticate:
		return new(AuthenticateResponse)
	case APIReassign:
		return new(ReassignResponse)
	case APIFindCoordinator:
		return new(FindCoordinatorResponse)
	case APIJoinGroup:
		return new(JoinGroupResponse)
	case APISyncGroup:
		return new(SyncGroupResponse)
	case APIHeartbeat:
		return new(HeartbeatResponse)
	case APILeaveGroup:
		return new(LeaveGroupResponse)
	case APICommitGroupOffsets:
		return new(CommitGroupOffsetsResponse)
	case APIFetchGroupOffsets:
		return new(FetchGroupOffsetsResponse)
	case APIListGroups:
		return new(ListGroupsResponse)
	case APIDescribeGroup:
		return new(DescribeGroupResponse)
	case APIDeleteGroup:
		return new(DeleteGroupResponse)
	case APIDeleteGroupOffsets:
		return new(DeleteGroupOffsetsResponse)
	case APIChangeRoster:
		return new(ChangeRosterResponse)
	case APIHome:
		return new(HomeResponse)
	}
	return nil
}
