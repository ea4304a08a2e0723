package node

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// replicaLogSize is the size of node n's log of partition p of topic,
// read on the replica's shard; ok is false when n hosts none.
func replicaLogSize(t *testing.T, n *Node, topic string, p int32) (size int64, ok bool) {
	t.Helper()
	tp := n.view.Load().Topics[topic]
	if tp == nil {
		return 0, false
	}
	key, i := shardKey(tp.ID, p), n.shardOf(tp.ID, p)
	ch := make(chan struct{})
	if err := n.group.Shard(i).Post(func() {
		if r := n.hosts[i].Get(key); r != nil {
			size, ok = r.Log().Size(), true
		}
		close(ch)
	}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("shard %d did not run a posted function within 30 s", i)
	}
	return size, ok
}

// kafkaProduceValues produces count records to partition p of topic and
// fails the test on any error.
func kafkaProduceValues(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, p int32, count int) {
	t.Helper()
	var rs []*kgo.Record
	for i := range count {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "value %04d of partition %d", i, p)})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s/%d: %v", topic, p, err)
	}
}

// logDirsMatch says whether the log directories every node described
// (kadm's DescribeAllLogDirs) are its data directory, made absolute,
// each listing exactly the replicas that node hosts of topics, each with
// its log's size on that node, read there, and offset lag 0; it returns
// what differed.
func logDirsMatch(t *testing.T, nodes []*Node, dirs []string, all kadm.DescribedAllLogDirs, topics ...string) string {
	t.Helper()
	if len(all) != len(nodes) {
		return fmt.Sprintf("%d brokers answered, want %d", len(all), len(nodes))
	}
	for i, n := range nodes {
		ds := all[int32(n.self)]
		abs, _ := filepath.Abs(dirs[i])
		d, ok := ds[abs]
		if len(ds) != 1 || !ok || d.Err != nil {
			return fmt.Sprintf("node %d: dirs %v, want only %s", n.self, ds, abs)
		}
		if d.Size() <= 0 {
			return fmt.Sprintf("node %d: its dir holds %d bytes", n.self, d.Size())
		}
		for _, topic := range topics {
			tp := n.view.Load().Topics[topic]
			for p := range tp.Replicas {
				size, hosted := replicaLogSize(t, n, topic, int32(p))
				got, listed := d.Topics[topic][int32(p)]
				switch {
				case hosted != slices.Contains(tp.Replicas[p], int32(n.self)):
					return fmt.Sprintf("node %d: %s/%d hosted %v, replicas %v", n.self, topic, p, hosted, tp.Replicas[p])
				case listed != hosted:
					return fmt.Sprintf("node %d: %s/%d listed %v, hosted %v", n.self, topic, p, listed, hosted)
				case listed && (got.Size != size || got.OffsetLag != 0 || got.Broker != int32(n.self)):
					return fmt.Sprintf("node %d: %s/%d size %d lag %d, the log's size %d", n.self, topic, p, got.Size, got.OffsetLag, size)
				}
			}
		}
	}
	return ""
}

// DescribeLogDirs on one node: its data directory, every partition of a
// topic with its log's size (the one written to larger than the empty
// one: 50 uncompressed records of 25-byte values), and only the
// partitions asked for when some are.
func TestKafkaDescribeLogDirs(t *testing.T) {
	dir := t.TempDir()
	n := runNode(t, dir, withKafka)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := kafkaClient(t, []string{n.KafkaAddr()}, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	adm := kadm.NewClient(cl)
	kafkaCreate(t, ctx, adm, "sized", 2, 1)
	kafkaProduceValues(t, ctx, cl, "sized", 0, 50)

	all, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if why := logDirsMatch(t, []*Node{n.Node}, []string{dir}, all, "sized"); why != "" {
		t.Fatal(why)
	}
	abs, _ := filepath.Abs(dir)
	d := all[1][abs]
	if p0, p1 := d.Topics["sized"][0].Size, d.Topics["sized"][1].Size; p0 < 50*25+p1 {
		t.Errorf("partition 0 (50 records) is %d bytes, partition 1 (none) %d", p0, p1)
	}

	ts := kadm.TopicsSet{}
	ts.Add("sized", 1)
	one, err := adm.DescribeBrokerLogDirs(ctx, 1, ts)
	if err != nil {
		t.Fatal(err)
	}
	if got := one[abs].Topics; len(got) != 1 || len(got["sized"]) != 1 || got["sized"][1].Partition != 1 {
		t.Errorf("asked for sized/1, answered %v", got)
	}
}

// DescribeLogDirs on three nodes: every node answers for the replicas it
// hosts, each size its own log's; a partition on all three is listed by
// each with the same size once they have replicated it.
func TestKafkaDescribeLogDirsCluster(t *testing.T) {
	tc, kports := startKafkaCluster(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cl := kafkaClient(t, kports, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	adm := kadm.NewClient(cl)
	kafkaCreateRetrying(t, ctx, adm, "everywhere", 1, 3)
	kafkaCreateRetrying(t, ctx, adm, "spread", 3, 1)
	kafkaProduceValues(t, ctx, cl, "everywhere", 0, 40)
	for p := range int32(3) {
		kafkaProduceValues(t, ctx, cl, "spread", p, 10)
	}
	dirs := make([]string, len(tc.cfgs))
	for i, c := range tc.cfgs {
		dirs[i] = c.Node.DataDir
	}
	var why string
	defer func() {
		if t.Failed() {
			t.Log("last difference:", why)
		}
	}()
	clusterWait(t, 30*time.Second, "every node's log dirs as it hosts them, the replicated partition's sizes equal", func() bool {
		all, err := adm.DescribeAllLogDirs(ctx, nil)
		if err != nil {
			why = err.Error()
			return false
		}
		if why = logDirsMatch(t, tc.nodes, dirs, all, "everywhere", "spread"); why != "" {
			return false
		}
		var sizes []int64
		for _, ds := range all {
			for _, d := range ds {
				sizes = append(sizes, d.Topics["everywhere"][0].Size)
			}
		}
		why = fmt.Sprintf("everywhere/0 sizes %v", sizes)
		return len(sizes) == 3 && sizes[0] > 0 && sizes[0] == sizes[1] && sizes[1] == sizes[2]
	})
}
