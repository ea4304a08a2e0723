package wire

// MetadataRequest asks for the cluster's nodes and partition routes.
//
// Body v0:
//
//	topics  array of string   empty = every topic
type MetadataRequest struct {
	// Topics restricts the answer; empty asks for every topic.
	Topics []string
}

func (*MetadataRequest) isRequest() {}

// APIKey returns APIMetadata.
func (*MetadataRequest) APIKey() APIKey { return APIMetadata }

// AppendBody encodes the body.
func (r *MetadataRequest) AppendBody(dst []byte, version uint16) []byte {
	dst = appendCount(dst, len(r.Topics))
	for _, t := range r.Topics {
		dst = appendString(dst, t)
	}
	return dst
}

// DecodeBody decodes the body.
func (r *MetadataRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIMetadata, version, false)
	r.Topics = grow(r.Topics, d.count("topics", TopicsMax, 2))
	for i := range r.Topics {
		d.str("topics[]", TopicNameBytesMax, &r.Topics[i])
	}
	return d.done()
}

// Node is one member of the roster as clients see it.
//
//	node_id      int32
//	client_addr  string  advertised HOST:PORT of the client protocol
//	http_addr    string  advertised HOST:PORT of the HTTP API; may be empty
//	rack         string  may be empty
//	alive        bool    the metadata primary hears from it
type Node struct {
	ID         int32
	ClientAddr string
	HTTPAddr   string
	Rack       string
	Alive      bool
}

const nodeMinBytes = 4 + 2 + 2 + 2 + 1

func (n *Node) append(dst []byte) []byte {
	dst = be.AppendUint32(dst, uint32(n.ID))
	dst = appendString(dst, n.ClientAddr)
	dst = appendString(dst, n.HTTPAddr)
	dst = appendString(dst, n.Rack)
	return appendBool(dst, n.Alive)
}

func (n *Node) decode(d *decoder) {
	n.ID = d.i32("node_id")
	d.str("client_addr", AddressBytesMax, &n.ClientAddr)
	d.str("http_addr", AddressBytesMax, &n.HTTPAddr)
	d.str("rack", RackBytesMax, &n.Rack)
	n.Alive = d.boolean("alive")
}

// PartitionRoute is what a client needs to reach one partition.
//
//	partition          int32
//	error_code         int16   e.g. PRIMARY_NOT_AVAILABLE; 0 when routable
//	primary_id         int32   -1 = none right now
//	generation         int32   the primary's consensus term
//	preferred_primary  int32   the replica the balancer wants as primary
//	replicas           array of int32   the replica set, preferred first
//	in_sync            array of int32   replicas caught up with the primary
//	offline            array of int32   replicas that are down
//
// The primary's client address is in the response's node list.
type PartitionRoute struct {
	Partition          int32
	ErrorCode          int16
	PrimaryID          int32
	Generation         int32
	PreferredPrimaryID int32
	Replicas           []int32
	InSync             []int32
	Offline            []int32
}

const partitionRouteMinBytes = 4 + 2 + 4 + 4 + 4 + 4 + 4 + 4

func (p *PartitionRoute) append(dst []byte) []byte {
	dst = be.AppendUint32(dst, uint32(p.Partition))
	dst = be.AppendUint16(dst, uint16(p.ErrorCode))
	dst = be.AppendUint32(dst, uint32(p.PrimaryID))
	dst = be.AppendUint32(dst, uint32(p.Generation))
	dst = be.AppendUint32(dst, uint32(p.PreferredPrimaryID))
	dst = appendInt32s(dst, p.Replicas)
	dst = appendInt32s(dst, p.InSync)
	return appendInt32s(dst, p.Offline)
}

func (p *PartitionRoute) decode(d *decoder) {
	p.Partition = d.i32("partition")
	p.ErrorCode = d.i16("error_code")
	p.PrimaryID = d.i32("primary_id")
	p.Generation = d.i32("generation")
	p.PreferredPrimaryID = d.i32("preferred_primary")
	p.Replicas = d.int32s("replicas", ReplicationFactorMax, p.Replicas)
	p.InSync = d.int32s("in_sync", ReplicationFactorMax, p.InSync)
	p.Offline = d.int32s("offline", ReplicationFactorMax, p.Offline)
}

// TopicMetadata is one topic with its partition routes.
//
//	error_code          int16   UNKNOWN_TOPIC_OR_PARTITION for a topic asked
//	                            for by name that does not exist
//	name                string
//	topic_id            uuid
//	replication_factor  int16
//	partitions          array of PartitionRoute, in partition order
type TopicMetadata struct {
	ErrorCode         int16
	Name              string
	ID                TopicID
	ReplicationFactor int16
	Partitions        []PartitionRoute
}

const topicMetadataMinBytes = 2 + 2 + 16 + 2 + 4

func (t *TopicMetadata) append(dst []byte) []byte {
	dst = be.AppendUint16(dst, uint16(t.ErrorCode))
	dst = appendString(dst, t.Name)
	dst = append(dst, t.ID[:]...)
	dst = be.AppendUint16(dst, uint16(t.ReplicationFactor))
	dst = appendCount(dst, len(t.Partitions))
	for i := range t.Partitions {
		dst = t.Partitions[i].append(dst)
	}
	return dst
}

func (t *TopicMetadata) decode(d *decoder) {
	t.ErrorCode = d.i16("error_code")
	d.str("name", TopicNameBytesMax, &t.Name)
	t.ID = d.uuid("topic_id")
	t.ReplicationFactor = d.i16("replication_factor")
	t.Partitions = grow(t.Partitions, d.count("partitions", PartitionsPerTopicMax, partitionRouteMinBytes))
	for i := range t.Partitions {
		t.Partitions[i].decode(d)
	}
}

// MetadataResponse lists the nodes, the metadata primary and the routes.
//
// Body v0:
//
//	metadata_primary_id  int32   -1 = unknown (no quorum)
//	metadata_generation  int32   the metadata group's term
//	nodes                array of Node
//	topics               array of TopicMetadata
type MetadataResponse struct {
	MetadataPrimaryID  int32
	MetadataGeneration int32
	Nodes              []Node
	Topics             []TopicMetadata
}

func (*MetadataResponse) isResponse() {}

// APIKey returns APIMetadata.
func (*MetadataResponse) APIKey() APIKey { return APIMetadata }

// AppendBody encodes the body.
func (r *MetadataResponse) AppendBody(dst []byte, version uint16) []byte {
	dst = be.AppendUint32(dst, uint32(r.MetadataPrimaryID))
	dst = be.AppendUint32(dst, uint32(r.MetadataGeneration))
	dst = appendCount(dst, len(r.Nodes))
	for i := range r.Nodes {
		dst = r.Nodes[i].append(dst)
	}
	dst = appendCount(dst, len(r.Topics))
	for i := range r.Topics {
		dst = r.Topics[i].append(dst)
	}
	return dst
}

// DecodeBody decodes the body.
func (r *MetadataResponse) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIMetadata, version, true)
	r.MetadataPrimaryID = d.i32("metadata_primary_id")
	r.MetadataGeneration = d.i32("metadata_generation")
	r.Nodes = grow(r.Nodes, d.count("nodes", NodesMax, nodeMinBytes))
	for i := range r.Nodes {
		r.Nodes[i].decode(&d)
	}
	r.Topics = grow(r.Topics, d.count("topics", TopicsMax, topicMetadataMinBytes))
	for i := range r.Topics {
		r.Topics[i].decode(&d)
	}
	return d.done()
}

// Node returns the node with the given id.
func (r *MetadataResponse) Node(id int32) (Node, bool) {
	for _, n := range r.Nodes {
		if n.ID == id {
			return n, true
		}
	}
	return Node{}, false
}

// Route is a resolved partition route: where a client sends data requests
// for one partition, and what it puts in their PartitionRef.
type Route struct {
	Ref PartitionRef
	// PrimaryID and PrimaryAddr name the primary's node and client address.
	PrimaryID   int32
	PrimaryAddr string
}

// Route resolves topic/partition against this metadata. It fails with
// UNKNOWN_TOPIC_OR_PARTITION when the topic or partition is absent, with
// the topic's or partition's own error code when set, and with
// PRIMARY_NOT_AVAILABLE when there is no primary or its node is unknown.
func (r *MetadataResponse) Route(topic string, partition int32) (Route, error) {
	for i := range r.Topics {
		t := &r.Topics[i]
		if t.Name != topic {
			continue
		}
		if t.ErrorCode != CodeNone {
			return Route{}, &ErrorResponse{Err: codeErr(t.ErrorCode), Message: "topic " + topic + " in metadata"}
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if p.Partition != partition {
				continue
			}
			if p.ErrorCode != CodeNone {
				return Route{}, Errorf(codeErr(p.ErrorCode), "partition %s/%d in metadata", topic, partition)
			}
			n, ok := r.Node(p.PrimaryID)
			if p.PrimaryID == NodeNone || !ok {
				return Route{}, Errorf(ErrPrimaryNotAvailable, "partition %s/%d has no reachable primary (primary id %d)", topic, partition, p.PrimaryID)
			}
			return Route{
				Ref:       PartitionRef{Topic: topic, TopicID: t.ID, Partition: partition, Generation: p.Generation},
				PrimaryID: p.PrimaryID, PrimaryAddr: n.ClientAddr,
			}, nil
		}
		return Route{}, Errorf(ErrUnknownTopicOrPartition, "topic %s has %d partitions, no partition %d", topic, len(t.Partitions), partition)
	}
	return Route{}, Errorf(ErrUnknownTopicOrPartition, "topic %s is not in the metadata", topic)
}

// codeErr returns the table *Error for a non-zero code (or a synthesized
// one for an unknown code).
func codeErr(code int16) *Error {
	e, _ := ErrorForCode(code).(*Error)
	if e == nil {
		return ErrUnknownServerError
	}
	return e
}
