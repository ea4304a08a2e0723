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
	// APIHome moves the connection to the shard that owns a partition
	// (home.go): shard-aware connections.
	APIHome APIKey = 19
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
	{APIClusterStatus, "ClusterStatus", 0, 1, "nodes with their primary and replica counts (v1: and their Kafka addresses)"},
	{APIMovePrimary, "MovePrimary", 0, 0, "move one partition's primary to another replica (metadata primary)"},
	{APIRebalance, "Rebalance", 0, 1, "plan, or plan and start, primary moves toward balance (metadata primary)"},
	{APIDescribePartition, "DescribePartition", 0, 0, "one partition's route, offsets and replica progress"},
	{APIAuthenticate, "Authenticate", 0, 0, "one step of the SCRAM-SHA-256 exchange that authenticates a connection (after Handshake)"},
	{APIReassign, "Reassign", 0, 0, "start, cancel or list replica moves (metadata primary)"},
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
	case APIHome:
		return new(HomeResponse)
	}
	return nil
}
