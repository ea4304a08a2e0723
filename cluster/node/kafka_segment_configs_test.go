package node

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/corestream/corestream/shard"
)

// segmentsOn is topic/p's replica on n: its log's segment roll bounds and
// segment count; ok false while n hosts no open replica of it.
func segmentsOn(n *Node, topic string, p int32) (bytes, ms int64, segs int, ok bool) {
	v := n.view.Load()
	if v == nil || v.Topics[topic] == nil {
		return 0, 0, 0, false
	}
	id := v.Topics[topic].ID
	i := n.shardOf(id, p)
	n.group.Shard(i).Do(func(*shard.Shard) {
		if h := n.hosts[i]; h != nil {
			if r := h.Get(shardKey(id, p)); r != nil && r.Log() != nil {
				bytes, ms = r.Log().SegmentRoll()
				segs, ok = r.Log().SegmentCount(), true
			}
		}
	})
	return bytes, ms, segs, ok
}

// A topic's segment.bytes and segment.ms, given at CreateTopics and
// changed with IncrementalAlterConfigs, reach every replica's segment log
// (through reconcile, as retention does): with segment.bytes 4096 twenty
// 1 KiB records roll every replica's log at least four times;
// DescribeConfigs shows the override as a dynamic topic config and the
// other as the node's default; DELETE returns it to the node's, and
// values out of bounds are INVALID_CONFIG naming the config.
func TestKafkaTopicSegmentConfigs(t *testing.T) {
	tc, kports := startKafkaCluster(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl := kafkaClient(t, kports, kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
	adm := kadm.NewClient(cl)
	for {
		res, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"segment.bytes": kadm.StringPtr("4096")}, "rolls")
		if err == nil && res.Err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("create rolls: %v %v", err, res.Err)
		}
		time.Sleep(100 * time.Millisecond) // the metadata primary is being elected
	}
	defBytes, defMs := tc.cfgs[0].Storage.SegmentBytes, tc.cfgs[0].Storage.SegmentMs

	for i := 0; i < 20; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "rolls", Value: []byte(strings.Repeat("r", 1024))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	clusterWait(t, 30*time.Second, "every replica rolled by segment.bytes 4096", func() bool {
		for _, n := range tc.nodes {
			if b, m, segs, ok := segmentsOn(n, "rolls", 0); !ok || b != 4096 || m != defMs || segs < 4 {
				return false
			}
		}
		return true
	})

	describe := func() map[string]kadm.Config {
		t.Helper()
		rcs, err := adm.DescribeTopicConfigs(ctx, "rolls")
		if err != nil || len(rcs) != 1 || rcs[0].Err != nil {
			t.Fatalf("describe: %v %+v", err, rcs)
		}
		out := map[string]kadm.Config{}
		for _, c := range rcs[0].Configs {
			out[c.Key] = c
		}
		return out
	}
	got := describe()
	if c := got["segment.bytes"]; c.MaybeValue() != "4096" || c.Source.String() != "DYNAMIC_TOPIC_CONFIG" {
		t.Fatalf("DescribeConfigs segment.bytes: %+v", c)
	}
	if c := got["segment.ms"]; c.MaybeValue() != "604800000" || c.Source.String() != "DEFAULT_CONFIG" {
		t.Fatalf("DescribeConfigs segment.ms: %+v", c)
	}

	alter := func(cfgs ...kadm.AlterConfig) (string, error) {
		t.Helper()
		for {
			res, err := adm.AlterTopicConfigs(ctx, cfgs, "rolls")
			msg := ""
			if err == nil && len(res) == 1 {
				err, msg = res[0].Err, res[0].ErrMessage
			}
			if !errors.Is(err, kerr.NotController) || ctx.Err() != nil {
				return msg, err
			}
		}
	}
	if _, err := alter(kadm.AlterConfig{Op: kadm.SetConfig, Name: "segment.ms", Value: kadm.StringPtr("600000")},
		kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "segment.bytes"}); err != nil {
		t.Fatal(err)
	}
	clusterWait(t, 30*time.Second, "segment.ms 600000 and the node's segment bytes on every replica", func() bool {
		for _, n := range tc.nodes {
			if b, m, _, ok := segmentsOn(n, "rolls", 0); !ok || b != defBytes || m != 600000 {
				return false
			}
		}
		return true
	})
	if c := describe()["segment.ms"]; c.MaybeValue() != "600000" || c.Source.String() != "DYNAMIC_TOPIC_CONFIG" {
		t.Fatalf("DescribeConfigs segment.ms after the change: %+v", c)
	}

	for _, bad := range []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "segment.bytes", Value: kadm.StringPtr("1023")},
		{Op: kadm.SetConfig, Name: "segment.bytes", Value: kadm.StringPtr("2147483648")},
		{Op: kadm.SetConfig, Name: "segment.ms", Value: kadm.StringPtr("-1")},
	} {
		msg, err := alter(bad)
		if !errors.Is(err, kerr.InvalidConfig) || !strings.Contains(msg, bad.Name) {
			t.Errorf("%s=%s: %v (%q), want INVALID_CONFIG naming it", bad.Name, *bad.Value, err, msg)
		}
	}
	if b, m, _, _ := segmentsOn(tc.nodes[0], "rolls", 0); b != defBytes || m != 600000 {
		t.Errorf("after the refusals node 1's replica rolls at %d bytes, %d ms", b, m)
	}
}
