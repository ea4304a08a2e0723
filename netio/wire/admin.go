package wire

// The admin APIs below serve operators (the CLI) rather than data paths.
// Those that change placement go to the metadata primary.

// ClusterStatusRequest asks for the cluster's state. Body v0 and v1 are
// empty.
type ClusterStatusRequest struct{}

func (*ClusterStatusRequest) isRequest() {}

// APIKey returns APIClusterStatus.
func (*ClusterStatusRequest) APIKey() APIKey { return APIClusterStatus }

// AppendBody encodes the (empty) body.
func (r *ClusterStatusRequest) AppendBody(dst []byte, version uint16) []byte { return dst }

// DecodeBody checks that the body is empty.
func (r *ClusterStatusRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIClusterStatus, version, false)
	return d.done()
}

// NodeStatus is one node with its share of the partitions.
//
//	node_id              int32
//	client_addr          string
//	http_addr            string
//	kafka_addr           string  v1+: the Kafka listener's advertised address ("" when none)
//	alive                bool
//	primaries            int32   partitions this node is primary of
//	replicas             int32   partitions this node holds a replica of
//	preferred_primaries  int32   partitions whose preferred primary it is
//	draining             bool    (v2) marked draining: replicas move off it
type NodeStatus struct {
	ID                 int32
	ClientAddr         string
	HTTPAddr           string
	KafkaAddr          string
	Alive              bool
	Primaries          int32
	Replicas           int32
	PreferredPrimaries int32
	Draining           bool
}

// ClusterStatusResponse answers ClusterStatus.
//
// Body v0, v1 (adds each node's kafka_addr) and v2 (adds each node's
// draining flag and, last, the cluster's id):
//
//	metadata_primary_id    int32
//	metadata_generation    int32
//	rebalance_in_progress  bool
//	partitions             int32   partitions in the cluster
//	under_replicated       int32   partitions with fewer in-sync replicas than replicas
//	offline                int32   partitions without a primary
//	nodes                  array of NodeStatus
//	cluster_id             string  (v2) the cluster's UUID; empty until minted
type ClusterStatusResponse struct {
	MetadataPrimaryID   int32
	MetadataGeneration  int32
	RebalanceInProgress bool
	Partitions          int32
	UnderReplicated     int32
	Offline             int32
	Nodes               []NodeStatus
	ClusterID           string
}

func (*ClusterStatusResponse) isResponse() {}

// APIKey returns APIClusterStatus.
func (*ClusterStatusResponse) APIKey() APIKey { return APIClusterStatus }

// AppendBody encodes the body.
func (r *ClusterStatusResponse) AppendBody(dst []byte, version uint16) []byte {
	dst = be.AppendUint32(dst, uint32(r.MetadataPrimaryID))
	dst = be.AppendUint32(dst, uint32(r.MetadataGeneration))
	dst = appendBool(dst, r.RebalanceInProgress)
	dst = be.AppendUint32(dst, uint32(r.Partitions))
	dst = be.AppendUint32(dst, uint32(r.UnderReplicated))
	dst = be.AppendUint32(dst, uint32(r.Offline))
	dst = appendCount(dst, len(r.Nodes))
	for _, n := range r.Nodes {
		dst = be.AppendUint32(dst, uint32(n.ID))
		dst = appendString(dst, n.ClientAddr)
		dst = appendString(dst, n.HTTPAddr)
		if version >= 1 {
			dst = appendString(dst, n.KafkaAddr)
		}
		dst = appendBool(dst, n.Alive)
		dst = be.AppendUint32(dst, uint32(n.Primaries))
		dst = be.AppendUint32(dst, uint32(n.Replicas))
		dst = be.AppendUint32(dst, uint32(n.PreferredPrimaries))
		if version >= 2 {
			dst = appendBool(dst, n.Draining)
		}
	}
	if version >= 2 {
		dst = appendString(dst, r.ClusterID)
	}
	return dst
}

// DecodeBody decodes the body.
func (r *ClusterStatusResponse) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIClusterStatus, version, true)
	r.MetadataPrimaryID = d.i32("metadata_primary_id")
	r.MetadataGeneration = d.i32("metadata_generation")
	r.RebalanceInProgress = d.boolean("rebalance_in_progress")
	r.Partitions = d.i32("partitions")
	r.UnderReplicated = d.i32("under_replicated")
	r.Offline = d.i32("offline")
	r.Nodes = grow(r.Nodes, d.count("nodes", NodesMax, 4+2+2+1+4+4+4))
	for i := range r.Nodes {
		n := &r.Nodes[i]
		n.ID = d.i32("nodes[].node_id")
		d.str("nodes[].client_addr", AddressBytesMax, &n.ClientAddr)
		d.str("nodes[].http_addr", AddressBytesMax, &n.HTTPAddr)
		if version >= 1 {
			d.str("nodes[].kafka_addr", AddressBytesMax, &n.KafkaAddr)
		}
		n.Alive = d.boolean("nodes[].alive")
		n.Primaries = d.i32("nodes[].primaries")
		n.Replicas = d.i32("nodes[].replicas")
		n.PreferredPrimaries = d.i32("nodes[].preferred_primaries")
		if version >= 2 {
			n.Draining = d.boolean("nodes[].draining")
		}
	}
	if version >= 2 {
		d.str("cluster_id", ClusterIDBytesMax, &r.ClusterID)
	}
	return d.done()
}

// MovePrimaryRequest moves one partition's primary to another in-sync
// replica (a leadership transfer). Sent to the metadata primary. Errors:
// NOT_REPLICA, NOT_IN_SYNC_REPLICA, NODE_NOT_AVAILABLE,
// REBALANCE_IN_PROGRESS, REQUEST_TIMED_OUT.
//
// Body v0:
//
//	topic           string
//	topic_id        uuid     zero = do not check
//	partition       int32
//	target_node_id  int32
//	timeout_ms      uint32   how long to wait for the move to finish
type MovePrimaryRequest struct {
	Topic        string
	TopicID      TopicID
	Partition    int32
	TargetNodeID int32
	TimeoutMs    uint32
}

func (*MovePrimaryRequest) isRequest() {}

// APIKey returns APIMovePrimary.
func (*MovePrimaryRequest) APIKey() APIKey { return APIMovePrimary }

// AppendBody encodes the body.
func (r *MovePrimaryRequest) AppendBody(dst []byte, version uint16) []byte {
	dst = appendString(dst, r.Topic)
	dst = append(dst, r.TopicID[:]...)
	dst = be.AppendUint32(dst, uint32(r.Partition))
	dst = be.AppendUint32(dst, uint32(r.TargetNodeID))
	return be.AppendUint32(dst, r.TimeoutMs)
}

// DecodeBody decodes the body.
func (r *MovePrimaryRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIMovePrimary, version, false)
	d.str("topic", TopicNameBytesMax, &r.Topic)
	r.TopicID = d.uuid("topic_id")
	r.Partition = d.i32("partition")
	r.TargetNodeID = d.i32("target_node_id")
	r.TimeoutMs = d.u32("timeout_ms")
	return d.done()
}

// MovePrimaryResponse answers MovePrimary once the target leads.
//
// Body v0:
//
//	primary_id  int32  the new primary
//	generation  int32  its generation
type MovePrimaryResponse struct {
	PrimaryID  int32
	Generation int32
}

func (*MovePrimaryResponse) isResponse() {}

// APIKey returns APIMovePrimary.
func (*MovePrimaryResponse) APIKey() APIKey { return APIMovePrimary }

// AppendBody encodes the body.
func (r *MovePrimaryResponse) AppendBody(dst []byte, version uint16) []byte {
	dst = be.AppendUint32(dst, uint32(r.PrimaryID))
	return be.AppendUint32(dst, uint32(r.Generation))
}

// DecodeBody decodes the body.
func (r *MovePrimaryResponse) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIMovePrimary, version, true)
	r.PrimaryID = d.i32("primary_id")
	r.Generation = d.i32("generation")
	return d.done()
}

// RebalanceRequest plans primary moves toward an even count per node and,
// unless DryRun, starts them (one at a time, in the background). Sent to
// the metadata primary; REBALANCE_IN_PROGRESS when one is running.
//
// Body v0:
//
//	dry_run    bool
//	moves_max  uint32  0 = no limit
//
// Body v1 appends:
//
//	preferred  bool    only move primaries back to their preferred replica
//	                   (the first of the replica list), every one led away
type RebalanceRequest struct {
	DryRun   bool
	MovesMax uint32
	// Preferred (v1; false in v0) plans only moves back to preferred
	// primaries, whatever cluster.leader_imbalance_percentage allows.
	Preferred bool
}

func (*RebalanceRequest) isRequest() {}

// APIKey returns APIRebalance.
func (*RebalanceRequest) APIKey() APIKey { return APIRebalance }

// AppendBody encodes the body.
func (r *RebalanceRequest) AppendBody(dst []byte, version uint16) []byte {
	dst = appendBool(dst, r.DryRun)
	dst = be.AppendUint32(dst, r.MovesMax)
	if version >= 1 {
		dst = appendBool(dst, r.Preferred)
	}
	return dst
}

// DecodeBody decodes the body.
func (r *RebalanceRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIRebalance, version, false)
	r.DryRun = d.boolean("dry_run")
	r.MovesMax = d.u32("moves_max")
	r.Preferred = false
	if version >= 1 {
		r.Preferred = d.boolean("preferred")
	}
	return d.done()
}

// PrimaryMove is one planned move.
//
//	topic      string
//	topic_id   uuid
//	partition  int32
//	from_node  int32
//	to_node    int32
type PrimaryMove struct {
	Topic     string
	TopicID   TopicID
	Partition int32
	FromNode  int32
	ToNode    int32
}

// RebalanceResponse answers Rebalance with the plan, in execution order.
//
// Body v0:
//
//	started  bool   false for a dry run or an empty plan
//	moves    array of PrimaryMove
type RebalanceResponse struct {
	Started bool
	Moves   []PrimaryMove
}

func (*RebalanceResponse) isResponse() {}

// APIKey returns APIRebalance.
func (*RebalanceResponse) APIKey() APIKey { return APIRebalance }

// AppendBody encodes the body.
func (r *RebalanceResponse) AppendBody(dst []byte, version uint16) []byte {
	dst = appendBool(dst, r.Started)
	dst = appendCount(dst, len(r.Moves))
	for _, m := range r.Moves {
		dst = appendString(dst, m.Topic)
		dst = append(dst, m.TopicID[:]...)
		dst = be.AppendUint32(dst, uint32(m.Partition))
		dst = be.AppendUint32(dst, uint32(m.FromNode))
		dst = be.AppendUint32(dst, uint32(m.ToNode))
	}
	return dst
}

// DecodeBody decodes the body.
func (r *RebalanceResponse) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIRebalance, version, true)
	r.Started = d.boolean("started")
	r.Moves = grow(r.Moves, d.count("moves", MovesMax, 2+16+4+4+4))
	for i := range r.Moves {
		m := &r.Moves[i]
		d.str("moves[].topic", TopicNameBytesMax, &m.Topic)
		m.TopicID = d.uuid("moves[].topic_id")
		m.Partition = d.i32("moves[].partition")
		m.FromNode = d.i32("moves[].from_node")
		m.ToNode = d.i32("moves[].to_node")
	}
	return d.done()
}

// DescribePartitionRequest asks a partition's primary for its state. The
// PartitionRef is checked as for data requests.
//
// Body v0:
//
//	PartitionRef
type DescribePartitionRequest struct {
	PartitionRef
}

func (*DescribePartitionRequest) isRequest() {}

// APIKey returns APIDescribePartition.
func (*DescribePartitionRequest) APIKey() APIKey { return APIDescribePartition }

// AppendBody encodes the body.
func (r *DescribePartitionRequest) AppendBody(dst []byte, version uint16) []byte {
	return r.PartitionRef.append(dst)
}

// DecodeBody decodes the body.
func (r *DescribePartitionRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIDescribePartition, version, false)
	r.PartitionRef.decode(&d)
	return d.done()
}

// ReplicaProgress is one replica as the primary sees it.
//
//	node_id            int32
//	log_end_offset     int64   last offset known replicated, plus one
//	in_sync            bool
//	last_caught_up_ms  int64   when it last matched the primary (ms since
//	                           the Unix epoch); -1 = never
type ReplicaProgress struct {
	NodeID         int32
	LogEndOffset   int64
	InSync         bool
	LastCaughtUpMs int64
}

// DescribePartitionResponse answers DescribePartition.
//
// Body v0:
//
//	route             PartitionRoute
//	log_start_offset  int64
//	high_watermark    int64
//	log_end_offset    int64   the primary's, committed or not
//	size_bytes        int64   bytes of the primary's log
//	segments          int32
//	replicas          array of ReplicaProgress
type DescribePartitionResponse struct {
	Route          PartitionRoute
	LogStartOffset int64
	HighWatermark  int64
	LogEndOffset   int64
	SizeBytes      int64
	Segments       int32
	Replicas       []ReplicaProgress
}

func (*DescribePartitionResponse) isResponse() {}

// APIKey returns APIDescribePartition.
func (*DescribePartitionResponse) APIKey() APIKey { return APIDescribePartition }

// AppendBody encodes the body.
func (r *DescribePartitionResponse) AppendBody(dst []byte, version uint16) []byte {
	dst = r.Route.append(dst)
	dst = be.AppendUint64(dst, uint64(r.LogStartOffset))
	dst = be.AppendUint64(dst, uint64(r.HighWatermark))
	dst = be.AppendUint64(dst, uint64(r.LogEndOffset))
	dst = be.AppendUint64(dst, uint64(r.SizeBytes))
	dst = be.AppendUint32(dst, uint32(r.Segments))
	dst = appendCount(dst, len(r.Replicas))
	for _, p := range r.Replicas {
		dst = be.AppendUint32(dst, uint32(p.NodeID))
		dst = be.AppendUint64(dst, uint64(p.LogEndOffset))
		dst = appendBool(dst, p.InSync)
		dst = be.AppendUint64(dst, uint64(p.LastCaughtUpMs))
	}
	return dst
}

// DecodeBody decodes the body.
func (r *DescribePartitionResponse) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIDescribePartition, version, true)
	r.Route.decode(&d)
	r.LogStartOffset = d.i64("log_start_offset")
	r.HighWatermark = d.i64("high_watermark")
	r.LogEndOffset = d.i64("log_end_offset")
	r.SizeBytes = d.i64("size_bytes")
	r.Segments = d.i32("segments")
	r.Replicas = grow(r.Replicas, d.count("replicas", ReplicationFactorMax, 4+8+1+8))
	for i := range r.Replicas {
		p := &r.Replicas[i]
		p.NodeID = d.i32("replicas[].node_id")
		p.LogEndOffset = d.i64("replicas[].log_end_offset")
		p.InSync = d.boolean("replicas[].in_sync")
		p.LastCaughtUpMs = d.i64("replicas[].last_caught_up_ms")
	}
	return d.done()
}
