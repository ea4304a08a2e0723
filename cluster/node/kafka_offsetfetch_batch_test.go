package node

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetFetch v8 asks for several groups at once (KIP-709): each is
// answered on its own, all its offsets or the partitions named, and a
// group with nothing committed answers -1; kadm's FetchManyOffsets (which
// sends v8 when the broker serves it) reads the same.
func TestKafkaOffsetFetchBatchedGroups(t *testing.T) {
	n := runNode(t, t.TempDir(), withKafka)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := kafkaClient(t, []string{n.KafkaAddr()})
	adm := kadm.NewClient(cl)
	kafkaCreateRetrying(t, ctx, adm, "batched", 2, 1)
	commit := func(group string, p int32, off int64) {
		t.Helper()
		var os kadm.Offsets
		os.Add(kadm.Offset{Topic: "batched", Partition: p, At: off, LeaderEpoch: -1})
		for deadline := time.Now().Add(20 * time.Second); ; {
			r, err := adm.CommitOffsets(ctx, group, os)
			if err == nil {
				err = r.Error()
			}
			if err == nil {
				return
			}
			if !kerr.IsRetriable(err) || time.Now().After(deadline) {
				t.Fatalf("commit %s: %v", group, err)
			}
			time.Sleep(50 * time.Millisecond) // the coordinator loading: retriable
		}
	}
	commit("g1", 0, 5)
	commit("g1", 1, 7)
	commit("g2", 0, 3)

	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	all := kmsg.NewOffsetFetchRequestGroup()
	all.Group = "g1" // Topics nil: everything committed
	named := kmsg.NewOffsetFetchRequestGroup()
	named.Group = "g2"
	nt := kmsg.NewOffsetFetchRequestGroupTopic()
	nt.Topic, nt.Partitions = "batched", []int32{0, 1}
	named.Topics = append(named.Topics, nt)
	none := kmsg.NewOffsetFetchRequestGroup()
	none.Group = "g3"
	none.Topics = append(none.Topics, nt)
	req.Groups = append(req.Groups, all, named, none)
	resp, err := req.RequestWith(ctx, cl.Broker(1))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]map[int32]int64{}
	for _, g := range resp.Groups {
		if g.ErrorCode != 0 {
			t.Fatalf("group %s: %v", g.Group, kerr.ErrorForCode(g.ErrorCode))
		}
		got[g.Group] = map[int32]int64{}
		for _, tp := range g.Topics {
			for _, p := range tp.Partitions {
				if tp.Topic != "batched" || p.ErrorCode != 0 {
					t.Fatalf("group %s: %s/%d error %v", g.Group, tp.Topic, p.Partition, kerr.ErrorForCode(p.ErrorCode))
				}
				got[g.Group][p.Partition] = p.Offset
			}
		}
	}
	want := map[string]map[int32]int64{"g1": {0: 5, 1: 7}, "g2": {0: 3, 1: -1}, "g3": {0: -1, 1: -1}}
	if len(resp.Groups) != 3 || len(got) != 3 {
		t.Fatalf("%d groups answered: %+v", len(resp.Groups), resp.Groups)
	}
	for g, w := range want {
		for p, off := range w {
			if got[g][p] != off {
				t.Fatalf("group %s partition %d: %d, want %d (all: %v)", g, p, got[g][p], off, got)
			}
		}
	}
	many := adm.FetchManyOffsets(ctx, "g1", "g2")
	if err := many.Error(); err != nil {
		t.Fatal(err)
	}
	if o, _ := many["g1"].Fetched.Lookup("batched", 1); o.At != 7 {
		t.Fatalf("FetchManyOffsets g1 batched/1: %+v", o)
	}
	if o, _ := many["g2"].Fetched.Lookup("batched", 0); o.At != 3 {
		t.Fatalf("FetchManyOffsets g2 batched/0: %+v", o)
	}
}
