package node

import (
	"fmt"
	"net"
	"time"

	"github.com/corestream/corestream/cluster/config"
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
		AutoCreatePartitions: n.autoCreatePartitions()}), config.ListenerKafka))
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
