package wire

// The group calls after the rebalance ones (groups.go): offsets and the
// operator's calls.

// CommitGroupOffsetsRequest commits a member's offsets under the group's
// name; the coordinator checks the member and generation first. A
// member_id "" with generation -1 is a consumer that assigns itself
// partitions (or an operator's reset), accepted only while the group
// has no members. Offsets are the group's named-consumer offsets:
// CommitOffsets and FetchOffsets with the group's name see them too.
//
// Body v0:
//
//	group       string
//	member_id   string
//	generation  int32
//	offsets     array of OffsetCommit
type CommitGroupOffsetsRequest struct {
	Group, MemberID string
	Generation      int32
	Offsets         []OffsetCommit
}

func (*CommitGroupOffsetsRequest) isRequest() {}

// APIKey returns APICommitGroupOffsets.
func (*CommitGroupOffsetsRequest) APIKey() APIKey { return APICommitGroupOffsets }

// AppendBody encodes the body.
func (r *CommitGroupOffsetsRequest) AppendBody(dst []byte, version uint16) []byte {
	dst = appendString(dst, r.Group)
	dst = appendString(dst, r.MemberID)
	dst = be.AppendUint32(dst, uint32(r.Generation))
	dst = appendCount(dst, len(r.Offsets))
	for _, o := range r.Offsets {
		dst = appendString(dst, o.Topic)
		dst = append(dst, o.TopicID[:]...)
		dst = be.AppendUint32(dst, uint32(o.Partition))
		dst = be.AppendUint64(dst, uint64(o.Offset))
		dst = appendString(dst, o.Metadata)
	}
	return dst
}

// DecodeBody decodes the body.
func (r *CommitGroupOffsetsRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APICommitGroupOffsets, version, false)
	d.str("group", ConsumerNameBytesMax, &r.Group)
	d.str("member_id", MemberIDBytesMax, &r.MemberID)
	r.Generation = d.i32("generation")
	r.Offsets = grow(r.Offsets, d.count("offsets", OffsetEntriesMax, 2+16+4+8+2))
	for i := range r.Offsets {
		o := &r.Offsets[i]
		d.str("offsets[].topic", TopicNameBytesMax, &o.Topic)
		o.TopicID = d.uuid("offsets[].topic_id")
		o.Partition = d.i32("offsets[].partition")
		o.Offset = d.i64("offsets[].offset")
		d.str("offsets[].metadata", CommitMetadataBytesMax, &o.Metadata)
	}
	return d.done()
}

// CommitGroupOffsetsResponse answers one result per entry, in request
// order; a refused member (UNKNOWN_MEMBER, ILLEGAL_GENERATION,
// REBALANCE_IN_PROGRESS) is an error response instead.
//
// Body v0:
//
//	results  array of PartitionResult
type CommitGroupOffsetsResponse struct {
	Results []PartitionResult
}

func (*CommitGroupOffsetsResponse) isResponse() {}

// APIKey returns APICommitGroupOffsets.
func (*CommitGroupOffsetsResponse) APIKey() APIKey { return APICommitGroupOffsets }

// AppendBody encodes the body.
func (r *CommitGroupOffsetsResponse) AppendBody(dst []byte, version uint16) []byte {
	return appendPartitionResults(dst, r.Results)
}

// DecodeBody decodes the body.
func (r *CommitGroupOffsetsResponse) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APICommitGroupOffsets, version, true)
	r.Results = decodePartitionResults(&d, r.Results)
	return d.done()
}

func appendPartitionResults(dst []byte, rs []PartitionResult) []byte {
	dst = appendCount(dst, len(rs))
	for _, p := range rs {
		dst = appendString(dst, p.Topic)
		dst = be.AppendUint32(dst, uint32(p.Partition))
		dst = be.AppendUint16(dst, uint16(p.ErrorCode))
	}
	return dst
}

func decodePartitionResults(d *decoder, rs []PartitionResult) []PartitionResult {
	rs = grow(rs, d.count("results", OffsetEntriesMax, 2+4+2))
	for i := range rs {
		p := &rs[i]
		d.str("results[].topic", TopicNameBytesMax, &p.Topic)
		p.Partition = d.i32("results[].partition")
		p.ErrorCode = d.i16("results[].error_code")
	}
	return rs
}

func appendTopicPartitions(dst []byte, ps []TopicPartition) []byte {
	dst = appendCount(dst, len(ps))
	for _, p := range ps {
		dst = appendString(dst, p.Topic)
		dst = be.AppendUint32(dst, uint32(p.Partition))
	}
	return dst
}

func decodeTopicPartitions(d *decoder, ps []TopicPartition) []TopicPartition {
	ps = grow(ps, d.count("partitions", OffsetEntriesMax, 2+4))
	for i := range ps {
		p := &ps[i]
		d.str("partitions[].topic", TopicNameBytesMax, &p.Topic)
		p.Partition = d.i32("partitions[].partition")
	}
	return ps
}

// FetchGroupOffsetsRequest reads a group's committed offsets at its
// coordinator; the answer is a FetchOffsetsResponse's.
//
// Body v0:
//
//	group       string
//	partitions  array of TopicPartition   empty = every partition committed
type FetchGroupOffsetsRequest struct {
	Group      string
	Partitions []TopicPartition
}

func (*FetchGroupOffsetsRequest) isRequest() {}

// APIKey returns APIFetchGroupOffsets.
func (*FetchGroupOffsetsRequest) APIKey() APIKey { return APIFetchGroupOffsets }

// AppendBody encodes the body.
func (r *FetchGroupOffsetsRequest) AppendBody(dst []byte, version uint16) []byte {
	dst = appendString(dst, r.Group)
	return appendTopicPartitions(dst, r.Partitions)
}

// DecodeBody decodes the body.
func (r *FetchGroupOffsetsRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIFetchGroupOffsets, version, false)
	d.str("group", ConsumerNameBytesMax, &r.Group)
	r.Partitions = decodeTopicPartitions(&d, r.Partitions)
	return d.done()
}

// FetchGroupOffsetsResponse is FetchOffsetsResponse's body under its own
// key.
//
// Body v0:
//
//	offsets  array of CommittedOffset
type FetchGroupOffsetsResponse struct {
	FetchOffsetsResponse
}

// APIKey returns APIFetchGroupOffsets.
func (*FetchGroupOffsetsResponse) APIKey() APIKey { return APIFetchGroupOffsets }

// DecodeBody decodes the body (its errors name FetchGroupOffsets).
func (r *FetchGroupOffsetsResponse) DecodeBody(body []byte, version uint16) error {
	return r.decode(body, APIFetchGroupOffsets, version)
}

// ListGroupsRequest lists the groups the node coordinates.
//
// Body v0:
//
//	states  array of string   Empty, PreparingRebalance,
//	                          CompletingRebalance, Stable; empty = all
type ListGroupsRequest struct {
	States []string
}

func (*ListGroupsRequest) isRequest() {}

// APIKey returns APIListGroups.
func (*ListGroupsRequest) APIKey() APIKey { return APIListGroups }

// AppendBody encodes the body.
func (r *ListGroupsRequest) AppendBody(dst []byte, version uint16) []byte {
	dst = appendCount(dst, len(r.States))
	for _, s := range r.States {
		dst = appendString(dst, s)
	}
	return dst
}

// DecodeBody decodes the body.
func (r *ListGroupsRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIListGroups, version, false)
	r.States = grow(r.States, d.count("states", GroupStatesMax, 2))
	for i := range r.States {
		d.str("states[]", GroupProtocolNameBytesMax, &r.States[i])
	}
	return d.done()
}

// GroupSummary is one group of a listing.
//
//	name           string
//	protocol_type  string
//	state          string
type GroupSummary struct {
	Name, ProtocolType, State string
}

// ListGroupsResponse lists groups, sorted by name.
//
// Body v0:
//
//	groups  array of GroupSummary
type ListGroupsResponse struct {
	Groups []GroupSummary
}

func (*ListGroupsResponse) isResponse() {}

// APIKey returns APIListGroups.
func (*ListGroupsResponse) APIKey() APIKey { return APIListGroups }

// AppendBody encodes the body.
func (r *ListGroupsResponse) AppendBody(dst []byte, version uint16) []byte {
	dst = appendCount(dst, len(r.Groups))
	for _, g := range r.Groups {
		dst = appendString(dst, g.Name)
		dst = appendString(dst, g.ProtocolType)
		dst = appendString(dst, g.State)
	}
	return dst
}

// DecodeBody decodes the body.
func (r *ListGroupsResponse) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIListGroups, version, true)
	r.Groups = grow(r.Groups, d.count("groups", GroupsMax, 2+2+2))
	for i := range r.Groups {
		g := &r.Groups[i]
		d.str("groups[].name", ConsumerNameBytesMax, &g.Name)
		d.str("groups[].protocol_type", GroupProtocolNameBytesMax, &g.ProtocolType)
		d.str("groups[].state", GroupProtocolNameBytesMax, &g.State)
	}
	return d.done()
}

// DescribeGroupRequest asks for one group's state and members.
//
// Body v0:
//
//	group  string
type DescribeGroupRequest struct {
	Group string
}

func (*DescribeGroupRequest) isRequest() {}

// APIKey returns APIDescribeGroup.
func (*DescribeGroupRequest) APIKey() APIKey { return APIDescribeGroup }

// AppendBody encodes the body.
func (r *DescribeGroupRequest) AppendBody(dst []byte, version uint16) []byte {
	return appendString(dst, r.Group)
}

// DecodeBody decodes the body.
func (r *DescribeGroupRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIDescribeGroup, version, false)
	d.str("group", ConsumerNameBytesMax, &r.Group)
	return d.done()
}

// GroupMemberDescription is one member of a described group.
//
//	member_id    string
//	instance_id  string
//	client_id    string
//	host         string
//	metadata     bytes   for the group's protocol
//	assignment   bytes
type GroupMemberDescription struct {
	MemberID, InstanceID, ClientID, Host string
	Metadata, Assignment                 []byte
}

// DescribeGroupResponse is a group's state; a group the coordinator does
// not hold is UNKNOWN_GROUP.
//
// Body v0:
//
//	name           string
//	state          string   Empty, PreparingRebalance, CompletingRebalance, Stable
//	protocol_type  string
//	protocol       string
//	generation     int32
//	members        array of GroupMemberDescription
type DescribeGroupResponse struct {
	Name, State, ProtocolType, Protocol string
	Generation                          int32
	Members                             []GroupMemberDescription
}

func (*DescribeGroupResponse) isResponse() {}

// APIKey returns APIDescribeGroup.
func (*DescribeGroupResponse) APIKey() APIKey { return APIDescribeGroup }

// AppendBody encodes the body.
func (r *DescribeGroupResponse) AppendBody(dst []byte, version uint16) []byte {
	dst = appendString(dst, r.Name)
	dst = appendString(dst, r.State)
	dst = appendString(dst, r.ProtocolType)
	dst = appendString(dst, r.Protocol)
	dst = be.AppendUint32(dst, uint32(r.Generation))
	dst = appendCount(dst, len(r.Members))
	for _, m := range r.Members {
		dst = appendString(dst, m.MemberID)
		dst = appendString(dst, m.InstanceID)
		dst = appendString(dst, m.ClientID)
		dst = appendString(dst, m.Host)
		dst = appendBytes(dst, m.Metadata)
		dst = appendBytes(dst, m.Assignment)
	}
	return dst
}

// DecodeBody decodes the body.
func (r *DescribeGroupResponse) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIDescribeGroup, version, true)
	d.str("name", ConsumerNameBytesMax, &r.Name)
	d.str("state", GroupProtocolNameBytesMax, &r.State)
	d.str("protocol_type", GroupProtocolNameBytesMax, &r.ProtocolType)
	d.str("protocol", GroupProtocolNameBytesMax, &r.Protocol)
	r.Generation = d.i32("generation")
	r.Members = grow(r.Members, d.count("members", GroupMembersMax, 2*4+4*2))
	for i := range r.Members {
		m := &r.Members[i]
		d.str("members[].member_id", MemberIDBytesMax, &m.MemberID)
		d.str("members[].instance_id", MemberIDBytesMax, &m.InstanceID)
		d.str("members[].client_id", ClientIDBytesMax, &m.ClientID)
		d.str("members[].host", AddressBytesMax, &m.Host)
		m.Metadata = d.bytes32("members[].metadata", GroupMetadataBytesMax)
		m.Assignment = d.bytes32("members[].assignment", GroupMetadataBytesMax)
	}
	return d.done()
}

// DeleteGroupRequest deletes an empty group and its committed offsets
// (NON_EMPTY_GROUP while it has members).
//
// Body v0:
//
//	group  string
type DeleteGroupRequest struct {
	Group string
}

func (*DeleteGroupRequest) isRequest() {}

// APIKey returns APIDeleteGroup.
func (*DeleteGroupRequest) APIKey() APIKey { return APIDeleteGroup }

// AppendBody encodes the body.
func (r *DeleteGroupRequest) AppendBody(dst []byte, version uint16) []byte {
	return appendString(dst, r.Group)
}

// DecodeBody decodes the body.
func (r *DeleteGroupRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIDeleteGroup, version, false)
	d.str("group", ConsumerNameBytesMax, &r.Group)
	return d.done()
}

// DeleteGroupResponse: the group is gone. Body v0 is empty.
type DeleteGroupResponse struct{}

func (*DeleteGroupResponse) isResponse() {}

// APIKey returns APIDeleteGroup.
func (*DeleteGroupResponse) APIKey() APIKey { return APIDeleteGroup }

// AppendBody encodes the (empty) body.
func (r *DeleteGroupResponse) AppendBody(dst []byte, version uint16) []byte { return dst }

// DecodeBody checks that the body is empty.
func (r *DeleteGroupResponse) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIDeleteGroup, version, true)
	return d.done()
}

// DeleteGroupOffsetsRequest drops a group's committed offsets of the
// partitions named (Kafka's OffsetDelete).
//
// Body v0:
//
//	group       string
//	partitions  array of TopicPartition
type DeleteGroupOffsetsRequest struct {
	Group      string
	Partitions []TopicPartition
}

func (*DeleteGroupOffsetsRequest) isRequest() {}

// APIKey returns APIDeleteGroupOffsets.
func (*DeleteGroupOffsetsRequest) APIKey() APIKey { return APIDeleteGroupOffsets }

// AppendBody encodes the body.
func (r *DeleteGroupOffsetsRequest) AppendBody(dst []byte, version uint16) []byte {
	dst = appendString(dst, r.Group)
	return appendTopicPartitions(dst, r.Partitions)
}

// DecodeBody decodes the body.
func (r *DeleteGroupOffsetsRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIDeleteGroupOffsets, version, false)
	d.str("group", ConsumerNameBytesMax, &r.Group)
	r.Partitions = decodeTopicPartitions(&d, r.Partitions)
	return d.done()
}

// DeleteGroupOffsetsResponse answers one result per partition, in
// request order (GROUP_SUBSCRIBED_TO_TOPIC for a topic a member
// subscribes to); UNKNOWN_GROUP is an error response.
//
// Body v0:
//
//	results  array of PartitionResult
type DeleteGroupOffsetsResponse struct {
	Results []PartitionResult
}

func (*DeleteGroupOffsetsResponse) isResponse() {}

// APIKey returns APIDeleteGroupOffsets.
func (*DeleteGroupOffsetsResponse) APIKey() APIKey { return APIDeleteGroupOffsets }

// AppendBody encodes the body.
func (r *DeleteGroupOffsetsResponse) AppendBody(dst []byte, version uint16) []byte {
	return appendPartitionResults(dst, r.Results)
}

// DecodeBody decodes the body.
func (r *DeleteGroupOffsetsResponse) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIDeleteGroupOffsets, version, true)
	r.Results = decodePartitionResults(&d, r.Results)
	return d.done()
}
