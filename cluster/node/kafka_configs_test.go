package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/shard"
)

// retentionOn is the retention (bytes, ms) of partition p of topic on
// node n's replica, read on its shard; ok is false when n hosts none.
func retentionOn(n *Node, topic string, p int32) (bytes, ms int64, ok bool) {
	v := n.view.Load()
	if v == nil || v.Topics[topic] == nil {
		return 0, 0, false
	}
	id := v.Topics[topic].ID
	i := n.shardOf(id, p)
	n.group.Shard(i).Do(func(*shard.Shard) {
		if h := n.hosts[i]; h != nil {
			if r := h.Get(shardKey(id, p)); r != nil {
				l := r.Config().Log
				bytes, ms, ok = l.RetentionBytes, l.RetentionMs, true
			}
		}
	})
	return bytes, ms, ok
}

// Topic configs change at run time through the Kafka port (kadm):
// IncrementalAlterConfigs SET and DELETE, AlterConfigs replacing them
// all; every node of a 3-node cluster applies the new retention to its
// replica, DescribeConfigs shows it, and bad values, configs we cannot
// change and unknown topics are refused with Kafka's codes.
func TestKafkaAlterTopicConfigs(t *testing.T) {
	tc, kports := startKafkaCluster(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := kadm.NewClient(kafkaClient(t, kports))
	kafkaCreateRetrying(t, ctx, adm, "cfg", 1, 3)
	defBytes, defMs := tc.cfgs[0].Storage.RetentionBytes, tc.cfgs[0].Storage.RetentionMs

	everyNode := func(what string, bytes, ms int64) {
		t.Helper()
		clusterWait(t, 30*time.Second, what, func() bool {
			for _, n := range tc.nodes {
				if b, m, ok := retentionOn(n, "cfg", 0); !ok || b != bytes || m != ms {
					return false
				}
			}
			return true
		})
	}
	alter := func(state bool, cfgs ...kadm.AlterConfig) error {
		t.Helper()
		for {
			var res kadm.AlterConfigsResponses
			var err error
			if state {
				res, err = adm.AlterTopicConfigsState(ctx, cfgs, "cfg")
			} else {
				res, err = adm.AlterTopicConfigs(ctx, cfgs, "cfg")
			}
			if err == nil && len(res) == 1 {
				err = res[0].Err
			}
			// A node that is not the metadata primary answers
			// NOT_CONTROLLER until the client asks the primary.
			if !errors.Is(err, kerr.NotController) || ctx.Err() != nil {
				return err
			}
		}
	}
	describe := func() map[string]kadm.Config {
		t.Helper()
		rcs, err := adm.DescribeTopicConfigs(ctx, "cfg")
		if err != nil || len(rcs) != 1 || rcs[0].Err != nil {
			t.Fatalf("describe: %v %+v", err, rcs)
		}
		out := map[string]kadm.Config{}
		for _, c := range rcs[0].Configs {
			out[c.Key] = c
		}
		return out
	}

	if err := alter(false, kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("3600000")},
		kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.bytes", Value: kadm.StringPtr("1048576")}); err != nil {
		t.Fatal(err)
	}
	everyNode("retention 1 MiB / 1 h on every replica", 1<<20, 3600000)
	if c := describe()["retention.ms"]; c.Value == nil || *c.Value != "3600000" || c.Source == 5 /* default */ {
		t.Fatalf("DescribeConfigs retention.ms: %+v", c)
	}

	if err := alter(false, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "retention.ms"}); err != nil {
		t.Fatal(err)
	}
	everyNode("retention.ms back to the node's default, retention.bytes kept", 1<<20, defMs)

	// AlterConfigs: exactly the configs given, the others to default.
	if err := alter(true, kadm.AlterConfig{Name: "retention.ms", Value: kadm.StringPtr("120000")}); err != nil {
		t.Fatal(err)
	}
	everyNode("AlterConfigs: retention.ms set, retention.bytes back to the default", defBytes, 120000)

	for _, bad := range []struct {
		name string
		cfg  kadm.AlterConfig
		want error
	}{
		{"negative retention", kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("-5")}, kerr.InvalidConfig},
		{"not a number", kadm.AlterConfig{Op: kadm.SetConfig, Name: "retention.bytes", Value: kadm.StringPtr("lots")}, kerr.InvalidConfig},
		{"a read-only config", kadm.AlterConfig{Op: kadm.SetConfig, Name: "fsync", Value: kadm.StringPtr("always")}, kerr.InvalidConfig},
		{"segment.bytes below its floor", kadm.AlterConfig{Op: kadm.SetConfig, Name: "segment.bytes", Value: kadm.StringPtr("1000")}, kerr.InvalidConfig},
		{"negative segment.ms", kadm.AlterConfig{Op: kadm.SetConfig, Name: "segment.ms", Value: kadm.StringPtr("-1")}, kerr.InvalidConfig},
		{"append to a number", kadm.AlterConfig{Op: kadm.AppendConfig, Name: "retention.ms", Value: kadm.StringPtr("1")}, kerr.InvalidConfig},
	} {
		if err := alter(false, bad.cfg); !errors.Is(err, bad.want) {
			t.Errorf("%s: %v, want %v", bad.name, err, bad.want)
		}
	}
	res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kadm.StringPtr("1")}}, "nope")
	if err == nil && len(res) == 1 {
		err = res[0].Err
	}
	if !errors.Is(err, kerr.UnknownTopicOrPartition) && !errors.Is(err, kerr.NotController) {
		t.Errorf("unknown topic: %v", err)
	}
	everyNode("the refused changes changed nothing", defBytes, 120000)
	for _, n := range tc.nodes {
		if got := n.view.Load().Topics["cfg"].Config; got != (metadata.TopicConfig{RetentionMs: 120000}) {
			t.Errorf("node %d's metadata holds %+v", n.self, got)
		}
	}
}
