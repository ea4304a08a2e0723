package node

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/frontend"
	"github.com/corestream/corestream/cluster/kafka"
	"github.com/corestream/corestream/netio"
)

// startKafka serves the Kafka protocol on l (node.kafka_addr), on the
// shards' own event loops next to the client listener. The listener
// calls the same typed service as the native protocol, so both read and
// write the same partitions, with the same offsets and topic ids.
func (n *Node) startKafka(l *netio.Listener) error {
	srv, err := netio.NewServer(n.group, netio.Config{
		MaxFrameBytes: n.cfg.Network.MaxFrameBytes, MaxInflightPerConn: n.cfg.Network.MaxInflightPerConn,
		MaxConnections: n.cfg.Network.MaxConnections, OutboundBytesMax: int64(n.cfg.Network.OutboundBytesMax),
		RetransmitBackoffMax: time.Duration(n.cfg.Network.TCPRetransmitMaxMs) * time.Millisecond,
		Logf:                 func(format string, args ...any) { n.log.Info("kafka: " + fmt.Sprintf(format, args...)) },
	}, n.guardPlain(kafka.New(n.svc, kafka.Config{MaxFrameBytes: n.cfg.Network.MaxFrameBytes, Log: n.log, Auth: n.kafkaAuth(),
		AutoCreatePartitions: n.autoCreatePartitions(), NodeID: int32(n.self), BrokerConfigs: brokerConfigs(&n.cfg), Users: n.svc,
		Mover: frontend.NewMover(frontend.Config{Group: n.group, OwnerShard: n.ownerShard, Migrations: &n.kafkaMigrations,
			CrossShard: &n.kafkaCrossShard})}), config.ListenerKafka))
	if err != nil {
		return err
	}
	if err := n.serveListener(srv, l, config.ListenerKafka); err != nil {
		return err
	}
	n.kafka = srv
	if _, port, err := net.SplitHostPort(n.cfg.Node.KafkaAddr); err == nil && port == "0" {
		bound := srv.Addr().String()
		n.kafkaBound.Store(&bound)
	}
	n.log.Info("listening", "kafka_addr", srv.Addr().String())
	return nil
}

// KafkaAddr is the address the Kafka listener bound ("" when disabled).
func (n *Node) KafkaAddr() string {
	if n.kafka == nil {
		return ""
	}
	return n.kafka.Addr().String()
}

// kafkaAddrOf is node id's Kafka address as Kafka clients must see it:
// the roster's, and for this node its bound address when it listens on
// a port picked at start-up ("" when the node has none).
func (n *Node) kafkaAddrOf(id int32) string {
	if id == int32(n.self) {
		if a := n.kafkaBound.Load(); a != nil {
			return *a
		}
		if n.kafka == nil {
			return ""
		}
	}
	for _, r := range n.roster.nodes() {
		if int32(r.ID) == id {
			if r.KafkaAddr == "" && id == int32(n.self) {
				return n.cfg.Node.KafkaAddr
			}
			return r.KafkaAddr
		}
	}
	return ""
}

// autoCreatePartitions is the Kafka listener's auto-creation setting:
// cluster.default_partitions with cluster.auto_create_topics, else 0 (off).
func (n *Node) autoCreatePartitions() int32 {
	if !n.cfg.Cluster.AutoCreateTopics {
		return 0
	}
	return int32(n.cfg.Cluster.DefaultPartitions)
}

// brokerConfigs is cfg under Kafka's broker config names, for
// DescribeConfigs: each Kafka config that one of ours decides, with the
// value in Kafka's unit and the setting it comes from.
func brokerConfigs(cfg *config.Config) []kafka.BrokerConfig {
	i := func(v int64) string { return strconv.FormatInt(v, 10) }
	b := func(v bool) string { return strconv.FormatBool(v) }
	bc := func(name, value, doc string) kafka.BrokerConfig {
		return kafka.BrokerConfig{Name: name, Value: value, Doc: doc}
	}
	rf := i(int64(cfg.Cluster.DefaultReplicationFactor.Resolve(max(len(cfg.Cluster.Nodes), 1))))
	return []kafka.BrokerConfig{
		bc("node.id", i(int64(cfg.Node.ID)), "node.id"),
		bc("broker.id", i(int64(cfg.Node.ID)), "node.id"),
		bc("broker.rack", cfg.Node.Rack, "node.rack"),
		bc("message.max.bytes", i(int64(cfg.Storage.MaxBatchBytes)), "storage.max_batch_bytes"),
		bc("log.retention.ms", i(cfg.Storage.RetentionMs), "storage.retention_ms"),
		bc("log.retention.bytes", i(cfg.Storage.RetentionBytes), "storage.retention_bytes"),
		bc("log.segment.bytes", i(cfg.Storage.SegmentBytes), "storage.segment_bytes"),
		bc("log.roll.ms", i(cfg.Storage.SegmentMs), "storage.segment_ms"),
		bc("log.retention.check.interval.ms", i(int64(cfg.Storage.RetentionCheckIntervalMs)), "storage.retention_check_interval_ms"),
		bc("num.partitions", i(int64(cfg.Cluster.DefaultPartitions)), "cluster.default_partitions"),
		bc("default.replication.factor", rf, "cluster.default_replication_factor (all: the roster's size)"),
		bc("auto.create.topics.enable", b(cfg.Cluster.AutoCreateTopics), "cluster.auto_create_topics"),
		bc("auto.leader.rebalance.enable", b(cfg.Cluster.AutoLeaderRebalance), "cluster.auto_leader_rebalance"),
		bc("leader.imbalance.per.broker.percentage", i(int64(cfg.Cluster.LeaderImbalancePercentage)), "cluster.leader_imbalance_percentage"),
		bc("leader.imbalance.check.interval.seconds", i(int64(cfg.Cluster.LeaderImbalanceCheckIntervalMs/1000)), "cluster.leader_imbalance_check_interval_ms"),
		bc("replica.lag.time.max.ms", i(int64(cfg.Cluster.ReplicaLagTimeMaxMs)), "cluster.replica_lag_time_max_ms"),
		bc("offsets.topic.num.partitions", i(int64(cfg.Cluster.GroupsPartitions)), "cluster.groups_partitions"),
		bc("socket.request.max.bytes", i(int64(cfg.Network.MaxFrameBytes)), "network.max_frame_bytes"),
		bc("max.connections", i(int64(cfg.Network.MaxConnections)), "network.max_connections"),
		bc("unclean.leader.election.enable", "false", "consensus never elects an unclean primary"),
		bc("log.cleanup.policy", "delete", "the default; a topic sets cleanup.policy (delete, compact, compact,delete)"),
	}
}
