package wire

// Sample bodies for every API, used by the round-trip tests, the fuzz seed
// corpus and the benchmarks. Empty arrays are nil, as decoding leaves them.

var (
	sampleTopicID = TopicID{0x0f, 0x1e, 0x2d, 0x3c, 0x4b, 0x5a, 0x69, 0x78, 0x87, 0x96, 0xa5, 0xb4, 0xc3, 0xd2, 0xe1, 0xf0}
	sampleRef     = PartitionRef{Topic: "orders", TopicID: sampleTopicID, Partition: 3, Generation: 7}
	// sampleBatch stands in for a RecordBatch v2; this package never parses it.
	sampleBatch = func() []byte {
		b := make([]byte, 1024)
		for i := range b {
			b[i] = byte(i * 7)
		}
		return b
	}()
)

func sampleRequests() []Request {
	return []Request{
		&HandshakeRequest{ProtocolMin: 1, ProtocolMax: 1, ClientID: "billing-7", ClientSoftware: "corestream-go/0.1.0"},
		&ProduceRequest{PartitionRef: sampleRef, Acks: AcksQuorum, TimeoutMs: 30000, Records: sampleBatch},
		&ProduceRequest{PartitionRef: PartitionRef{Topic: "t", Generation: -1}, Acks: AcksPrimary},
		&FetchRequest{PartitionRef: sampleRef, FetchOffset: 1 << 40, MaxBytes: 1 << 20, MinBytes: 1, MaxWaitMs: 500},
		&ListOffsetsRequest{PartitionRef: sampleRef, Timestamp: TimestampEarliest},
		&ListOffsetsRequest{PartitionRef: sampleRef, Timestamp: 1_700_000_000_000},
		&MetadataRequest{},
		&MetadataRequest{Topics: []string{"orders", "payments", ""}},
		&CreateTopicRequest{Name: "orders", Partitions: 12, ReplicationFactor: 3, TimeoutMs: 10000,
			Configs: []Config{{"retention.ms", "604800000"}, {"cleanup.policy", ""}}},
		&CreateTopicRequest{Name: "x", Partitions: 1, ValidateOnly: true},
		&DeleteTopicRequest{Name: "orders", TopicID: sampleTopicID, TimeoutMs: 5000},
		&ListTopicsRequest{},
		&DescribeTopicRequest{Name: "orders"},
		&AddPartitionsRequest{Name: "orders", TopicID: sampleTopicID, Partitions: 24, TimeoutMs: 1, ValidateOnly: true},
		&CommitOffsetsRequest{Consumer: "billing", Offsets: []OffsetCommit{
			{Topic: "orders", TopicID: sampleTopicID, Partition: 0, Offset: 42, Metadata: "host-a"},
			{Topic: "orders", Partition: 1, Offset: 0}}},
		&FetchOffsetsRequest{Consumer: "billing", Partitions: []TopicPartition{{"orders", 0}, {"orders", 1}}},
		&FetchOffsetsRequest{Consumer: "billing"},
		&InitProducerRequest{ProducerID: ProducerIDNone, ProducerEpoch: -1},
		&InitProducerRequest{ProducerID: 1234, ProducerEpoch: 5},
		&ClusterStatusRequest{},
		&MovePrimaryRequest{Topic: "orders", TopicID: sampleTopicID, Partition: 3, TargetNodeID: 2, TimeoutMs: 30000},
		&RebalanceRequest{DryRun: true, MovesMax: 10},
		&DescribePartitionRequest{PartitionRef: sampleRef},
		&AuthenticateRequest{Mechanism: MechanismSCRAMSHA256, Payload: []byte("n,,n=alice,r=fyko+d2lbbFgONRv9qkxdawL")},
		&ReassignRequest{Action: ReassignStart, DryRun: true, Moves: []ReassignMove{{"orders", 3, []int32{4, 2, 3}}}},
		&ReassignRequest{Action: ReassignList},
		&FindCoordinatorRequest{Group: "billing"},
		&JoinGroupRequest{Group: "billing", InstanceID: "host-a", ProtocolType: "consumer", SessionTimeoutMs: 10000,
			RebalanceTimeoutMs: 30000, Protocols: []GroupProtocol{{"range", []byte{0, 0, 0, 0, 0, 1, 0, 6, 'o', 'r', 'd', 'e', 'r', 's'}}, {"sticky", nil}}},
		&JoinGroupRequest{Group: "billing", MemberID: "billing-1-9f"},
		&SyncGroupRequest{Group: "billing", MemberID: "billing-1-9f", Generation: 3,
			Assignments: []GroupAssignment{{"billing-1-9f", []byte{0, 0, 1}}, {"billing-2-a0", nil}}},
		&SyncGroupRequest{Group: "billing", MemberID: "billing-2-a0", Generation: 3},
		&HeartbeatRequest{Group: "billing", MemberID: "billing-1-9f", Generation: 3},
		&LeaveGroupRequest{Group: "billing", Members: []LeavingMember{{MemberID: "billing-1-9f"}, {InstanceID: "host-a"}}},
		&CommitGroupOffsetsRequest{Group: "billing", MemberID: "billing-1-9f", Generation: 3, Offsets: []OffsetCommit{
			{Topic: "orders", TopicID: sampleTopicID, Partition: 0, Offset: 42, Metadata: "host-a"}}},
		&CommitGroupOffsetsRequest{Group: "billing", Generation: -1},
		&FetchGroupOffsetsRequest{Group: "billing", Partitions: []TopicPartition{{"orders", 0}}},
		&FetchGroupOffsetsRequest{Group: "billing"},
		&ListGroupsRequest{States: []string{"Stable", "Empty"}},
		&ListGroupsRequest{},
		&DescribeGroupRequest{Group: "billing"},
		&DeleteGroupRequest{Group: "billing"},
		&DeleteGroupOffsetsRequest{Group: "billing", Partitions: []TopicPartition{{"orders", 0}, {"orders", 1}}},
		&ChangeRosterRequest{Action: RosterAdd, Member: RosterMember{ID: 4, ClientAddr: "10.0.0.4:7070", ReplicationAddr: "10.0.0.4:7071", Rack: "b"}},
		&ChangeRosterRequest{Action: RosterList},
		&HomeRequest{PartitionRef: sampleRef},
		&HomeRequest{PartitionRef: sampleRef, Stay: true},
	}
}

var sampleRoute = PartitionRoute{Partition: 3, PrimaryID: 2, Generation: 7, PreferredPrimaryID: 1,
	Replicas: []int32{1, 2, 3}, InSync: []int32{1, 2}, Offline: []int32{3}}

func sampleResponses() []Response {
	return []Response{
		ServerHandshake(1, 2, "c0ffee", "corestream/0.1.0", FrameBytesMaxDefault),
		&ProduceResponse{BaseOffset: 100, LogAppendTimeMs: -1, LogStartOffset: 0},
		&FetchResponse{HighWatermark: 200, LogStartOffset: 10, PreferredReadReplica: NodeNone, Records: sampleBatch},
		&FetchResponse{HighWatermark: 0, LogStartOffset: 0, PreferredReadReplica: NodeNone},
		&ListOffsetsResponse{Offset: 150, Timestamp: 1_700_000_000_123, LogStartOffset: 10, HighWatermark: 200},
		&MetadataResponse{MetadataPrimaryID: 1, MetadataGeneration: 4,
			Nodes: []Node{{ID: 1, ClientAddr: "10.0.0.1:7070", HTTPAddr: "10.0.0.1:7072", Rack: "a", Alive: true},
				{ID: 2, ClientAddr: "10.0.0.2:7070", Alive: true}, {ID: 3, ClientAddr: "10.0.0.3:7070"}},
			Topics: []TopicMetadata{
				{Name: "orders", ID: sampleTopicID, ReplicationFactor: 3, Partitions: []PartitionRoute{
					{Partition: 0, PrimaryID: 1, Generation: 2, PreferredPrimaryID: 1, Replicas: []int32{1, 2, 3}, InSync: []int32{1, 2, 3}},
					sampleRoute,
					{Partition: 4, ErrorCode: ErrPrimaryNotAvailable.Code, PrimaryID: -1, Generation: 9, PreferredPrimaryID: 3, Replicas: []int32{3}, Offline: []int32{3}},
				}},
				{ErrorCode: ErrUnknownTopicOrPartition.Code, Name: "nope"},
			}},
		&MetadataResponse{MetadataPrimaryID: -1},
		&CreateTopicResponse{TopicID: sampleTopicID, Partitions: 12, ReplicationFactor: 3},
		&DeleteTopicResponse{TopicID: sampleTopicID},
		&ListTopicsResponse{Topics: []TopicSummary{{"a", sampleTopicID, 1, 1}, {"orders", TopicID{1}, 12, 3}}},
		&DescribeTopicResponse{Topic: TopicMetadata{Name: "orders", ID: sampleTopicID, ReplicationFactor: 3,
			Partitions: []PartitionRoute{sampleRoute}},
			Configs: []ConfigEntry{{"retention.ms", "-1", true}, {"segment.bytes", "1048576", false}}},
		&AddPartitionsResponse{Partitions: 24},
		&CommitOffsetsResponse{Results: []PartitionResult{{"orders", 0, 0}, {"gone", 1, ErrUnknownTopicOrPartition.Code}}},
		&FetchOffsetsResponse{Offsets: []CommittedOffset{
			{Topic: "orders", TopicID: sampleTopicID, Partition: 0, Offset: 42, Metadata: "host-a"},
			{Topic: "orders", Partition: 1, Offset: OffsetNone}}},
		&InitProducerResponse{ProducerID: 1234, ProducerEpoch: 6},
		&ClusterStatusResponse{MetadataPrimaryID: 1, MetadataGeneration: 4, RebalanceInProgress: true,
			Partitions: 36, UnderReplicated: 2, Offline: 1, Nodes: []NodeStatus{
				{ID: 1, ClientAddr: "10.0.0.1:7070", HTTPAddr: "10.0.0.1:7072", Alive: true, Primaries: 12, Replicas: 36, PreferredPrimaries: 12},
				{ID: 2, ClientAddr: "10.0.0.2:7070", Primaries: 0, Replicas: 36, PreferredPrimaries: 12}}},
		&MovePrimaryResponse{PrimaryID: 2, Generation: 8},
		&RebalanceResponse{Started: true, Moves: []PrimaryMove{{"orders", sampleTopicID, 3, 1, 2}}},
		&RebalanceResponse{},
		&DescribePartitionResponse{Route: sampleRoute, LogStartOffset: 10, HighWatermark: 200, LogEndOffset: 205,
			SizeBytes: 1 << 30, Segments: 4, Replicas: []ReplicaProgress{
				{NodeID: 1, LogEndOffset: 205, InSync: true, LastCaughtUpMs: 1_700_000_000_000},
				{NodeID: 3, LogEndOffset: 120, LastCaughtUpMs: -1}}},
		&AuthenticateResponse{Payload: []byte("r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096")},
		&AuthenticateResponse{Payload: []byte("v=rmF9pqV8S7suAoZWja4dJRkFsKQ="), Complete: true, User: "alice"},
		&ReassignResponse{Moves: []ReassignStatus{{Topic: "orders", Partition: 3, From: []int32{1, 2, 3}, Target: []int32{4, 2, 3},
			Driven: true, EntriesBehind: 12, BytesBehind: 4096, Steps: []string{"learner_added 4"}}}},
		&ReassignResponse{},
		&FindCoordinatorResponse{NodeID: 2, Address: "10.0.0.2:7070", KafkaAddress: "10.0.0.2:9092"},
		&JoinGroupResponse{Generation: 3, ProtocolType: "consumer", Protocol: "range", LeaderID: "billing-1-9f", MemberID: "billing-1-9f",
			Members: []GroupMember{{MemberID: "billing-1-9f", Metadata: []byte{0, 1}}, {MemberID: "billing-2-a0", InstanceID: "host-b"}}},
		&JoinGroupResponse{Generation: 3, ProtocolType: "consumer", Protocol: "range", LeaderID: "billing-1-9f", MemberID: "billing-2-a0"},
		&SyncGroupResponse{ProtocolType: "consumer", Protocol: "range", Assignment: []byte{0, 0, 1}},
		&SyncGroupResponse{},
		&HeartbeatResponse{},
		&LeaveGroupResponse{Results: []MemberResult{{"billing-1-9f", 0}, {"", ErrUnknownMember.Code}}},
		&CommitGroupOffsetsResponse{Results: []PartitionResult{{"orders", 0, 0}, {"gone", 1, ErrUnknownTopicOrPartition.Code}}},
		&FetchGroupOffsetsResponse{FetchOffsetsResponse{Offsets: []CommittedOffset{{Topic: "orders", Partition: 0, Offset: 42}}}},
		&ListGroupsResponse{Groups: []GroupSummary{{"billing", "consumer", "Stable"}, {"audit", "", "Empty"}}},
		&DescribeGroupResponse{Name: "billing", State: "Stable", ProtocolType: "consumer", Protocol: "range", Generation: 3,
			Members: []GroupMemberDescription{{MemberID: "billing-1-9f", ClientID: "billing", Host: "10.0.0.9:51000",
				Metadata: []byte{0, 1}, Assignment: []byte{2}}}},
		&DeleteGroupResponse{},
		&DeleteGroupOffsetsResponse{Results: []PartitionResult{{"orders", 0, ErrGroupSubscribedToTopic.Code}}},
		&ChangeRosterResponse{Members: []RosterMember{{ID: 1, ClientAddr: "10.0.0.1:7070", ReplicationAddr: "10.0.0.1:7071", State: "active"},
			{ID: 4, ClientAddr: "10.0.0.4:7070", ReplicationAddr: "10.0.0.4:7071", HTTPAddr: "10.0.0.4:7072", KafkaAddr: "10.0.0.4:9092", Rack: "b", State: "joining"}}},
		&ChangeRosterResponse{},
		&HomeResponse{Shard: 1, Shards: 2},
	}
}
