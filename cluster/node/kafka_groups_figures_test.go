package node

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/netio/wire"
)

// A measurement, not a check: BENCHMARKS.md's consumer group figures.
//
//	go test ./cluster/node -run TestKafkaGroupFigures -v -group-figures
var groupFiguresFlag = flag.Bool("group-figures", false, "TestKafkaGroupFigures: run the consumer group measurement")

// Rebalance time of franz-go groups of 1, 5 and 10 members over 12
// partitions (all starting together, then one more joining), and the
// offset commits per second a coordinator stores (each commit of 12
// partitions, from 1 and 8 concurrent committers).
func TestKafkaGroupFigures(t *testing.T) {
	if !*groupFiguresFlag {
		t.Skip("a measurement: run with -group-figures")
	}
	n := runNode(t, t.TempDir(), withKafka)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	addrs := []string{n.KafkaAddr()}
	adm := kadm.NewClient(kafkaClient(t, addrs))
	kafkaCreate(t, ctx, adm, "fig", 12, -1)
	stable := func(group string, members int) {
		clusterWait(t, 120*time.Second, fmt.Sprintf("%d members sharing 12 partitions", members), func() bool {
			st, per, err := describeAssigned(ctx, adm, group)
			if err != nil || st != "Stable" || len(per) != members {
				return false
			}
			sum := 0
			for _, p := range per {
				sum += p
			}
			return sum == 12
		})
	}
	for _, size := range []int{1, 5, 10} {
		group := fmt.Sprintf("fig%d", size)
		led := newGroupLedger()
		var ms []*groupMember
		start := time.Now()
		for i := 0; i < size; i++ {
			ms = append(ms, startGroupMember(t, ctx, addrs, group, "fig", fmt.Sprintf("m%d", i), led))
		}
		stable(group, size)
		formed := time.Since(start)
		start = time.Now()
		ms = append(ms, startGroupMember(t, ctx, addrs, group, "fig", "extra", led))
		stable(group, size+1)
		t.Logf("FIGURE group of %d: formed (all starting together) in %v; one more member joined in %v", size, formed.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		for _, m := range ms {
			m.close()
		}
	}

	// Offset commits: a Kafka group's and a native named consumer's
	// (generation -1, into the group's partition of __groups, acks =
	// quorum). BENCHMARKS.md's metadata-group baseline is the native
	// path at commit 11d08ca, before named consumers moved to __groups.
	measureCommits(t, ctx, "one node", addrs, []string{n.ClientAddr()}, "fig")
}

// measureCommits logs the offset commits per second of 1 and 8
// committers (a group each, and 8 sharing one group: one coordinator;
// 12 partitions of topic per commit) over the Kafka port and the native
// port.
func measureCommits(t *testing.T, ctx context.Context, what string, kafkaAddrs, nativeAddrs []string, topic string) {
	commitKafka := func(cl *kgo.Client, group string, off int64) error {
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Version, r.Group, r.Generation = 8, group, -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		for p := int32(0); p < 12; p++ {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = p, off
			rt.Partitions = append(rt.Partitions, rp)
		}
		r.Topics = append(r.Topics, rt)
		resp, err := r.RequestWith(ctx, cl)
		if err != nil {
			return err
		}
		if c := resp.Topics[0].Partitions[0].ErrorCode; c != 0 {
			return kerr.ErrorForCode(c)
		}
		return nil
	}
	commitNative := func(cl *client.Client, group string, off int64) error {
		offs := make([]wire.OffsetCommit, 12)
		for p := range offs {
			offs[p] = wire.OffsetCommit{Topic: topic, Partition: int32(p), Offset: off}
		}
		return cl.CommitOffsets(ctx, group, offs)
	}
	for _, path := range []string{"Kafka", "native"} {
		for _, run := range []struct {
			committers int
			shared     bool
		}{{1, false}, {8, false}, {8, true}} {
			committers := run.committers
			var done atomic.Int64
			window := 3 * time.Second
			var wg, ready sync.WaitGroup
			begin := make(chan struct{})
			for c := 0; c < committers; c++ {
				wg.Add(1)
				ready.Add(1)
				go func(c int) {
					defer wg.Done()
					group := fmt.Sprintf("commits%d", c)
					if run.shared {
						group = "commits-shared"
					}
					var commit func(int64) error
					if path == "Kafka" {
						kc := kafkaClient(t, kafkaAddrs)
						commit = func(off int64) error { return commitKafka(kc, group, off) }
					} else {
						nc, err := client.Dial(ctx, nativeAddrs...)
						if err != nil {
							t.Error(err)
							ready.Done()
							return
						}
						defer nc.Close()
						commit = func(off int64) error { return commitNative(nc, group, off) }
					}
					// The first commit waits for the group's
					// coordinator (it creates and loads __groups).
					clusterWait(t, 30*time.Second, "a first commit", func() bool { return commit(0) == nil })
					ready.Done()
					<-begin
					end := time.Now().Add(window)
					for off := int64(1); time.Now().Before(end); off++ {
						if err := commit(off); err != nil {
							t.Errorf("commit: %v", err)
							return
						}
						done.Add(1)
					}
				}(c)
			}
			ready.Wait()
			close(begin)
			wg.Wait()
			groupsOf := "a group each"
			if run.shared {
				groupsOf = "one group"
			}
			t.Logf("FIGURE %s, %s, %d committers, %s: %.0f commits/s of 12 partitions each (%.0f offsets/s)", what, path, committers, groupsOf,
				float64(done.Load())/window.Seconds(), 12*float64(done.Load())/window.Seconds())
		}
	}
}

// The same commits on a 3-node cluster: 8 groups' coordinators spread
// over the nodes.
//
//	go test ./cluster/node -run TestKafkaGroupCommitFiguresCluster -v -args -group-figures
func TestKafkaGroupCommitFiguresCluster(t *testing.T) {
	if !*groupFiguresFlag {
		t.Skip("a measurement: run with -group-figures")
	}
	tc, kports := startKafkaCluster(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	kafkaCreateRetrying(t, ctx, kadm.NewClient(kafkaClient(t, kports)), "fig3", 12, 3)
	measureCommits(t, ctx, "3 nodes", kports, tc.brokers(), "fig3")
}
