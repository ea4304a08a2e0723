package kafka

import "github.com/twmb/franz-go/pkg/kmsg"

// Kafka API keys this listener serves.
const (
	produceKey          int16 = 0
	fetchKey            int16 = 1
	listOffsetsKey      int16 = 2
	metadataKey         int16 = 3
	offsetCommitKey     int16 = 8
	offsetFetchKey      int16 = 9
	findCoordinatorKey  int16 = 10
	joinGroupKey        int16 = 11
	heartbeatKey        int16 = 12
	leaveGroupKey       int16 = 13
	syncGroupKey        int16 = 14
	describeGroupsKey   int16 = 15
	listGroupsKey       int16 = 16
	apiVersionsKey      int16 = 18
	createTopicsKey     int16 = 19
	deleteTopicsKey     int16 = 20
	initProducerIDKey   int16 = 22
	offsetForEpochKey   int16 = 23
	describeConfigsKey  int16 = 32
	createPartitionsKey int16 = 37
	deleteGroupsKey     int16 = 42
	offsetDeleteKey     int16 = 47
	describeClusterKey  int16 = 60
	// saslHandshakeKey and saslAuthenticateKey are in sasl.go,
	// describeLogDirsKey, describeTopicPartitionsKey, describeProducersKey, deleteRecordsKey, the SCRAM
	// credential and the ACL keys in their files.
)

// supported is exactly what ApiVersions lists: each API this listener
// answers, with the versions it implements. Produce and Fetch start at
// the first versions of RecordBatch v2 (magic 2), which the log stores;
// Metadata at 0, which older clients (kafka-python) send right after
// ApiVersions to probe the broker: a closed connection there made them
// take us for Kafka 0.9. The
// maximums stop before topic ids replaced names in Produce (13) and
// before features we lack (ListOffsets 8: tiered storage); Fetch 13
// names topics by id (topicids.go), and stops there (14 and later carry
// replica fields and KIP-951's leader endpoints, not served).
// OffsetForLeaderEpoch starts at 2, the first with current_leader_epoch
// (Kafka 4 serves no older one).
// docs/kafka.md prints this table; TestDocumentedVersions keeps the two
// in step.
var supported = []struct {
	key      int16
	min, max int16
}{
	{produceKey, 3, 12},
	{fetchKey, 4, 17},
	{listOffsetsKey, 1, 7},
	{metadataKey, 0, 12},
	// The group APIs (groups.go) stop before KIP-848's member epochs
	// (OffsetCommit 9, OffsetFetch 9); OffsetFetch 8 batches groups.
	{offsetCommitKey, 2, 8},
	{offsetFetchKey, 1, 8},
	{findCoordinatorKey, 0, 4},
	{joinGroupKey, 0, 9},
	{heartbeatKey, 0, 4},
	{leaveGroupKey, 0, 5},
	{syncGroupKey, 0, 5},
	{describeGroupsKey, 0, 5},
	{listGroupsKey, 0, 4},
	{apiVersionsKey, 0, 4},
	{createTopicsKey, 2, 7},
	{deleteTopicsKey, 1, 5},
	{initProducerIDKey, 0, 4},
	// The transaction APIs (txns.go) speak transaction version 1: the
	// client adds each partition (AddPartitionsToTxn 4 and later is the
	// brokers' batched form), and EndTxn stops before 5 (KIP-890's epoch
	// bump per transaction).
	{addPartitionsToTxnKey, 0, 3},
	{addOffsetsToTxnKey, 0, 4},
	{endTxnKey, 0, 4},
	{txnOffsetCommitKey, 0, 4},
	{describeTransactionsKey, 0, 0},
	{listTransactionsKey, 0, 0},
	{offsetForEpochKey, 2, 4},
	{describeConfigsKey, 0, 4},
	{alterConfigsKey, 0, 2},
	{incrementalAlterConfigsKey, 0, 1},
	{createPartitionsKey, 0, 3},
	{deleteGroupsKey, 0, 2},
	{offsetDeleteKey, 0, 0},
	{describeClusterKey, 0, 1},
	{describeLogDirsKey, 0, 4},
	{describeTopicPartitionsKey, 0, 0},
	{describeUserScramCredentialsKey, 0, 0},
	{alterUserScramCredentialsKey, 0, 0},
	{describeACLsKey, 0, 3},
	{createACLsKey, 0, 3},
	{deleteACLsKey, 0, 3},
	{electLeadersKey, 0, 2},
	{alterPartitionAssignmentsKey, 0, 0},
	{listPartitionReassignmentsKey, 0, 0},
	{describeProducersKey, 0, 0},
	{deleteRecordsKey, 0, 2},
	{saslHandshakeKey, 0, 1},
	{saslAuthenticateKey, 0, 2},
}

// versionRange returns key's supported versions; ok is false for an API
// this listener does not serve.
func versionRange(key int16) (min, max int16, ok bool) {
	for _, s := range supported {
		if s.key == key {
			return s.min, s.max, true
		}
	}
	return 0, 0, false
}

// apiVersionsResponse lists supported. err is 0, or UNSUPPORTED_VERSION
// when the client asked for a version we do not speak (it then retries
// with one we list).
func apiVersionsResponse(errCode int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ErrorCode = errCode
	for _, s := range supported {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = s.key, s.min, s.max
		resp.ApiKeys = append(resp.ApiKeys, k)
	}
	return resp
}
