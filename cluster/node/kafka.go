package node

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/kafka"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"
)

// kafkaBackend is the Kafka listener's view of the node (kafka.Backend):
// the same replicas, metadata controller and producer ids the native
// protocol uses, so both protocols read and write the same data, with
// the same offsets and topic ids.
type kafkaBackend struct{ n *Node }

var _ kafka.Backend = kafkaBackend{}

// startKafka serves the Kafka protocol on l (node.kafka_addr) on the
// shards' own event loops, next to the client listener.
func (n *Node) startKafka(l *netio.Listener) error {
	srv, err := netio.NewServer(n.group, netio.Config{
		MaxFrameBytes: n.cfg.Network.MaxFrameBytes, MaxInflightPerConn: n.cfg.Network.MaxInflightPerConn,
		MaxConnections: n.cfg.Network.MaxConnections, OutboundBytesMax: int64(n.cfg.Network.OutboundBytesMax),
		RetransmitBackoffMax: time.Duration(n.cfg.Network.TCPRetransmitMaxMs) * time.Millisecond,
		Logf:                 func(format string, args ...any) { n.log.Info("kafka: " + fmt.Sprintf(format, args...)) },
	}, kafka.New(kafkaBackend{n}, n.log, n.cfg.Network.MaxFrameBytes))
	if err != nil {
		return err
	}
	if err := srv.Serve(l); err != nil {
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

// kafkaAdvertised is roster node r's Kafka address as Kafka clients must
// see it: this node's bound address when it listens on a port picked at
// start-up.
func (n *Node) kafkaAdvertised(r config.RosterNode) string {
	if int32(r.ID) == int32(n.self) {
		if a := n.kafkaBound.Load(); a != nil {
			return *a
		}
		if r.KafkaAddr == "" {
			return n.cfg.Node.KafkaAddr
		}
	}
	return r.KafkaAddr
}

func (b kafkaBackend) Brokers() []kafka.Broker {
	var out []kafka.Broker
	for _, m := range b.n.nodes() {
		for _, r := range b.n.roster {
			if int32(r.ID) != m.ID {
				continue
			}
			host, port, err := net.SplitHostPort(b.n.kafkaAdvertised(r))
			if err != nil {
				continue // no Kafka address: not a broker to Kafka clients
			}
			p, _ := strconv.Atoi(port)
			out = append(out, kafka.Broker{ID: m.ID, Host: host, Port: int32(p)})
		}
	}
	return out
}

func (b kafkaBackend) ClusterID() string { return b.n.clusterID() }

func (b kafkaBackend) ControllerID() int32 {
	id, _ := b.n.metaRoute()
	if id <= 0 {
		return -1
	}
	return id
}

func (b kafkaBackend) Topics(names []string, all bool) ([]kafka.TopicInfo, error) {
	n := b.n
	if err := n.metadataReady(); err != nil {
		return nil, err
	}
	v := n.view.Load()
	var out []kafka.TopicInfo
	if all {
		for _, t := range v.Sorted {
			out = append(out, n.kafkaTopic(t))
		}
		return out, nil
	}
	for _, name := range names {
		t := v.Topics[name]
		if t == nil {
			out = append(out, kafka.TopicInfo{Name: name, Err: wire.Errorf(wire.ErrUnknownTopicOrPartition, "topic %q does not exist", name)})
			continue
		}
		out = append(out, n.kafkaTopic(t))
	}
	return out, nil
}

// kafkaTopic is t's metadata: per partition the route every other
// answer gives (partitionRoute), the primary as leader and its
// generation as leader epoch.
func (n *Node) kafkaTopic(t *metadata.Topic) kafka.TopicInfo {
	ti := kafka.TopicInfo{Name: t.Name, ID: t.ID, ReplicationFactor: int16(t.ReplicationFactor)}
	for p := range t.Replicas {
		pr := n.partitionRoute(t, int32(p))
		pi := kafka.PartitionInfo{Index: int32(p), Leader: pr.PrimaryID, LeaderEpoch: pr.Generation,
			Replicas: pr.Replicas, ISR: pr.InSync, Offline: pr.Offline}
		if pr.ErrorCode != 0 {
			pi.Err, _ = wire.ErrorForCode(pr.ErrorCode).(*wire.Error)
		}
		ti.Partitions = append(ti.Partitions, pi)
	}
	return ti
}

// onReplica runs fn on the shard that owns partition p of topic name,
// with its local replica, and hands fn's answer back on home through
// done; fail answers a routing error instead.
func onReplica[R any](n *Node, home *shard.Shard, name string, p int32, fail func(error) R,
	fn func(r *partition.Replica, t *metadata.Topic, done func(R)), done func(R)) {
	t := n.view.Load().Topics[name]
	if t == nil || p < 0 || int(p) >= t.Partitions() {
		done(fail(n.missingPartition(name, p, t)))
		return
	}
	run := func(to *shard.Shard, reply func(R)) {
		r, err := n.replicaFor(to, t, p)
		if err != nil {
			reply(fail(err))
			return
		}
		fn(r, t, reply)
	}
	owner := n.group.Shard(n.shardOf(t.ID, p))
	if owner == home {
		run(home, done)
		return
	}
	if err := shard.CallAsync(home, owner, run, done); err != nil {
		done(fail(busy(err)))
	}
}

func (b kafkaBackend) Produce(home *shard.Shard, req *kafka.ProduceReq, done func(kafka.ProduceRes)) {
	fail := func(err error) kafka.ProduceRes { return kafka.ProduceRes{Err: err} }
	onReplica(b.n, home, req.Topic, req.Partition, fail, func(r *partition.Replica, _ *metadata.Topic, reply func(kafka.ProduceRes)) {
		args := partition.ProduceArgs{Generation: partition.GenerationUnknown, AcksPrimary: req.Acks != kafka.AcksAll,
			Timeout: req.Timeout, Records: req.Records}
		r.Produce(&args, func(res partition.ProduceResult) {
			reply(kafka.ProduceRes{BaseOffset: res.Produced.BaseOffset, LogAppendTimeMs: res.Produced.LogAppendTimeMs,
				LogStartOffset: res.Produced.LogStartOffset, Err: res.Err})
		})
	}, done)
}

func (b kafkaBackend) Fetch(home *shard.Shard, req *kafka.FetchReq, done func(kafka.FetchRes)) {
	n := b.n
	fail := func(err error) kafka.FetchRes { return kafka.FetchRes{Err: err} }
	onReplica(n, home, req.Topic, req.Partition, fail, func(r *partition.Replica, _ *metadata.Topic, reply func(kafka.FetchRes)) {
		args := partition.FetchArgs{Generation: req.LeaderEpoch, Offset: req.Offset,
			MaxBytes: uint32(min(req.MaxBytes, wire.RecordsBytesMax)), MinBytes: uint32(max(req.MinBytes, 0)), MaxWait: req.MaxWait}
		if n.stopped.Load() {
			args.MaxWait = 0 // stopping: no new long polls
		}
		r.Fetch(&args, func(res partition.FetchResult) {
			if res.Err != nil {
				reply(kafka.FetchRes{Err: res.Err})
				return
			}
			// The record bytes are copied out of the segment files: a
			// Kafka response interleaves partitions with their headers,
			// which one header and a list of file ranges cannot carry.
			out := kafka.FetchRes{HighWatermark: res.HighWatermark, LogStartOffset: res.LogStartOffset}
			buf := make([]byte, 0, res.Bytes)
			var err error
			for _, sp := range res.Spans {
				if buf, err = sp.AppendTo(buf); err != nil {
					break
				}
			}
			segment.ReleaseSpans(res.Spans)
			if err != nil {
				out.Err = wire.Errorf(wire.ErrStorageError, "reading a segment: %v", err)
			}
			out.Records = buf
			reply(out)
		})
	}, done)
}

func (b kafkaBackend) ListOffsets(home *shard.Shard, req *kafka.ListOffsetsReq, done func(kafka.ListOffsetsRes)) {
	fail := func(err error) kafka.ListOffsetsRes { return kafka.ListOffsetsRes{Err: err} }
	onReplica(b.n, home, req.Topic, req.Partition, fail, func(r *partition.Replica, _ *metadata.Topic, reply func(kafka.ListOffsetsRes)) {
		offs, err := r.ListOffsets(req.LeaderEpoch, req.Timestamp)
		_, term := r.Route()
		reply(kafka.ListOffsetsRes{Offset: offs.Offset, Timestamp: offs.Timestamp, LeaderEpoch: term, Err: err})
	}, done)
}

func (b kafkaBackend) InitProducerID(_ *shard.Shard, id int64, epoch int16, done func(int64, int16, error)) {
	// As the native InitProducer: the next epoch of a known id, or a new
	// id when there is none or its epochs are spent.
	if id >= 0 && epoch >= 0 && epoch < 32767 {
		done(id, epoch+1, nil)
		return
	}
	id, err := b.n.pids.allocate()
	if err != nil {
		done(-1, -1, wire.Errorf(wire.ErrUnknownServerError, "%v", err))
		return
	}
	done(id, 0, nil)
}

// admin runs a native admin request on the controller's shard and
// answers on home.
func (b kafkaBackend) admin(home *shard.Shard, req wire.Request, done func(any)) {
	n := b.n
	err := shard.CallAsync(home, n.group.Shard(metaShard), func(_ *shard.Shard, reply func(any)) {
		n.ctrl.serve(req, reply)
	}, func(v any) {
		if err, ok := v.(error); ok {
			v = n.withAddress(err)
		}
		done(v)
	})
	if err != nil {
		done(busy(err))
	}
}

// kafkaConfigKeys maps Kafka's topic config names onto ours.
var kafkaConfigKeys = map[string]string{"retention.ms": "retention_ms", "retention.bytes": "retention_bytes"}

func (b kafkaBackend) CreateTopic(home *shard.Shard, req *kafka.CreateTopicReq, done func(kafka.TopicInfo, error)) {
	rf := req.ReplicationFactor
	switch {
	case rf == -1:
		rf = 0 // the cluster's default
	case rf < 1 || int(rf) > config.ReplicationFactorMax:
		done(kafka.TopicInfo{}, wire.Errorf(wire.ErrInvalidReplicationFactor, "topic %s: replication factor %d is outside -1 (cluster default) or 1..%d",
			req.Name, rf, config.ReplicationFactorMax))
		return
	}
	wr := &wire.CreateTopicRequest{Name: req.Name, Partitions: req.Partitions, ReplicationFactor: rf,
		TimeoutMs: uint32(req.Timeout / time.Millisecond), ValidateOnly: req.ValidateOnly}
	for k, v := range req.Configs {
		if ours, ok := kafkaConfigKeys[k]; ok {
			k = ours
		} else if strings.Contains(k, ".") {
			done(kafka.TopicInfo{}, wire.Errorf(wire.ErrInvalidConfig, "topic config %q is not supported (supported: retention.ms, retention.bytes)", k))
			return
		}
		wr.Configs = append(wr.Configs, wire.Config{Key: k, Value: v})
	}
	b.admin(home, wr, func(v any) {
		switch v := v.(type) {
		case error:
			done(kafka.TopicInfo{}, v)
		case *wire.CreateTopicResponse:
			done(kafka.TopicInfo{Name: req.Name, ID: [16]byte(v.TopicID), ReplicationFactor: v.ReplicationFactor,
				Partitions: make([]kafka.PartitionInfo, v.Partitions)}, nil)
		default:
			done(kafka.TopicInfo{}, wire.Errorf(wire.ErrUnknownServerError, "unexpected answer %T", v))
		}
	})
}

func (b kafkaBackend) DeleteTopic(home *shard.Shard, name string, timeout time.Duration, done func(error)) {
	b.admin(home, &wire.DeleteTopicRequest{Name: name, TimeoutMs: uint32(timeout / time.Millisecond)}, func(v any) {
		err, _ := v.(error)
		done(err)
	})
}

func (b kafkaBackend) AddPartitions(home *shard.Shard, name string, total int32, timeout time.Duration, validateOnly bool, done func(error)) {
	b.admin(home, &wire.AddPartitionsRequest{Name: name, Partitions: total, TimeoutMs: uint32(timeout / time.Millisecond),
		ValidateOnly: validateOnly}, func(v any) {
		err, _ := v.(error)
		done(err)
	})
}
