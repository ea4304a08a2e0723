package node

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
)

// joinCoordinated sends join until the group's coordinator answers it:
// the first group request of a cluster creates the internal topic, and
// a node that just became a partition's primary loads it first
// (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE meanwhile).
func joinCoordinated(ctx context.Context, t *testing.T, join *kmsg.JoinGroupRequest, cl kmsg.Requestor) (*kmsg.JoinGroupResponse, error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		jr, err := join.RequestWith(ctx, cl)
		if err != nil || time.Now().After(deadline) {
			return jr, err
		}
		switch jr.ErrorCode {
		case kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code:
		default:
			return jr, err
		}
		select {
		case <-ctx.Done():
			return jr, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// groupOffsetsWatch polls a group's committed offsets and records any
// partition whose committed offset moved backwards.
type groupOffsetsWatch struct {
	mu       sync.Mutex
	last     map[string]int64
	backward []string
	stop     chan struct{}
	done     chan struct{}
}

func watchGroupOffsets(ctx context.Context, adm func() *kadm.Client, group string) *groupOffsetsWatch {
	w := &groupOffsetsWatch{last: map[string]int64{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			offs, err := adm().FetchOffsets(fctx, group)
			cancel()
			if err != nil {
				continue // the coordinator is moving: nothing to compare
			}
			w.mu.Lock()
			seen := map[string]bool{}
			offs.Each(func(o kadm.OffsetResponse) {
				if o.Err != nil {
					return
				}
				k := fmt.Sprintf("%s/%d", o.Topic, o.Partition)
				seen[k] = true
				if prev, ok := w.last[k]; ok && o.At < prev {
					w.backward = append(w.backward, fmt.Sprintf("%s: %d after %d", k, o.At, prev))
				}
				if o.At > w.last[k] {
					w.last[k] = o.At
				}
			})
			for k, prev := range w.last {
				if !seen[k] {
					// An answer without a partition committed before: its
					// offset is lost (a coordinator that forgot it).
					w.backward = append(w.backward, fmt.Sprintf("%s: none after %d", k, prev))
				}
			}
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *groupOffsetsWatch) close() []string {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.backward
}

// memberIDs are the group's member ids, sorted, and its generation
// (DescribeGroups answers no generation; the members' ids tell a
// rejoin as a new member apart).
func memberIDs(ctx context.Context, adm *kadm.Client, group string) ([]string, error) {
	ds, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return nil, err
	}
	if ds[group].Err != nil {
		return nil, ds[group].Err
	}
	var ids []string
	for _, m := range ds[group].Members {
		ids = append(ids, m.MemberID)
	}
	sort.Strings(ids)
	return ids, nil
}

// The coordinator's node stops while three franz-go members consume 12
// partitions: the primary of the group's __groups partition moves, the
// new one replays the group, and the members carry on with the same
// member ids; every record is processed, no committed offset moves
// backwards, and the last commits cover every record. The records
// processed twice are logged against step one's 250-400 of 1,800 (the
// new coordinator then refused every commit until the members rejoined).
func TestGroupsCoordinatorFailover(t *testing.T) {
	tc, kports := startKafkaCluster(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	adm := kadm.NewClient(kafkaClient(t, kports))
	kafkaCreateRetrying(t, ctx, adm, "gf", 12, 3)
	produceValues(t, ctx, kports, "gf", "a", 0, 1200)

	led := newGroupLedger()
	for _, name := range []string{"m1", "m2", "m3"} {
		startGroupMember(t, ctx, kports, "gfg", "gf", name, led, kgo.SessionTimeout(6*time.Second))
	}
	clusterWait(t, 60*time.Second, "3 members with 4 partitions each", func() bool {
		st, per, err := describeAssigned(ctx, adm, "gfg")
		return err == nil && st == "Stable" && len(per) == 3 && per["m1"] == 4 && per["m2"] == 4 && per["m3"] == 4
	})
	waitProcessed(t, led, 1200, 60*time.Second)
	before, err := memberIDs(ctx, adm, "gfg")
	if err != nil {
		t.Fatal(err)
	}
	fr := adm.FindGroupCoordinators(ctx, "gfg")
	if fr["gfg"].Err != nil {
		t.Fatalf("find coordinator: %+v", fr)
	}
	coord := fr["gfg"].NodeID

	var admMu sync.Mutex
	curAdm := adm
	watch := watchGroupOffsets(ctx, func() *kadm.Client { admMu.Lock(); defer admMu.Unlock(); return curAdm }, "gfg")

	// 600 more records while the coordinator's node stops: the members
	// are consuming (and committing) across the failover.
	var alive []string
	for i := range tc.nodes {
		if int32(i+1) != coord {
			alive = append(alive, kports[i])
		}
	}
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		for i := 0; i < 600; i += 50 {
			produceValues(t, ctx, alive, "gf", "b", i, 50)
		}
	}()
	waitProcessed(t, led, 1300, 60*time.Second)
	stopped := time.Now()
	tc.stopNode(int(coord - 1))
	// A Kafka client keeps the coordinator it found until told
	// NOT_COORDINATOR, also one it cannot dial: the admin client is made
	// once a live node coordinates the group (the route no longer names
	// the stopped node).
	raw := kafkaClient(t, alive)
	var next int32
	clusterWait(t, 30*time.Second, "a live coordinator", func() bool {
		find := kmsg.NewPtrFindCoordinatorRequest()
		find.CoordinatorKey = "gfg"
		fr, err := find.RequestWith(ctx, raw)
		next = fr.NodeID
		return err == nil && fr.ErrorCode == 0 && fr.NodeID != coord && fr.NodeID > 0
	})
	admMu.Lock()
	curAdm = kadm.NewClient(kafkaClient(t, alive))
	adm = curAdm
	admMu.Unlock()
	<-produced
	waitProcessed(t, led, 1800, 90*time.Second)
	took := time.Since(stopped)
	_, dup := led.count()

	clusterWait(t, 60*time.Second, "3 members with 4 partitions each at the new coordinator", func() bool {
		st, per, err := describeAssigned(ctx, adm, "gfg")
		return err == nil && st == "Stable" && len(per) == 3 && per["m1"] == 4 && per["m2"] == 4 && per["m3"] == 4
	})
	after, err := memberIDs(ctx, adm, "gfg")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("coordinator node %d stopped; node %d took over; every record processed within %v, %d of 1800 processed twice (step one: 250-400)",
		coord, next, took, dup)
	if fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("members %v before the failover, %v after: the new coordinator did not know them", before, after)
	}
	// Every record committed: each partition's committed offset reaches
	// its end (the members commit what they processed; wait for the
	// last commits).
	clusterWait(t, 30*time.Second, "the committed offsets to reach the end of every partition", func() bool {
		offs, err := adm.FetchOffsets(ctx, "gfg")
		if err != nil {
			return false
		}
		ends, err := adm.ListEndOffsets(ctx, "gf")
		if err != nil {
			return false
		}
		all := true
		ends.Each(func(e kadm.ListedOffset) {
			o, ok := offs.Lookup(e.Topic, e.Partition)
			all = all && ok && o.Err == nil && o.At == e.Offset
		})
		return all
	})
	if back := watch.close(); len(back) > 0 {
		t.Errorf("committed offsets moved backwards: %v", back)
	}
	if dup > 200 {
		t.Errorf("%d records processed twice; the replayed coordinator should accept the members' commits at once", dup)
	}
}

// Many groups' coordinators spread over every node of the cluster: the
// primaries of the internal topic's partitions.
func TestGroupsCoordinatorsSpread(t *testing.T) {
	_, kports := startKafkaCluster(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(kafkaClient(t, kports))
	var names []string
	for i := 0; i < 64; i++ {
		names = append(names, fmt.Sprintf("spread-%d", i))
	}
	per := map[int32]int{}
	clusterWait(t, 45*time.Second, "a coordinator for every group on every node", func() bool {
		// The first group request at the metadata primary (which
		// coordinates every group until then) creates the topic; its
		// partitions then elect their primaries, spread like any
		// topic's.
		_, _ = adm.DescribeGroups(ctx, names[0])
		fr := adm.FindGroupCoordinators(ctx, names...)
		per = map[int32]int{}
		for _, n := range names {
			if fr[n].Err != nil {
				return false
			}
			per[fr[n].NodeID]++
		}
		return len(per) == 3
	})
	t.Logf("64 groups' coordinators per node: %v", per)
	for id, n := range per {
		if n < 64/3/3 {
			t.Errorf("node %d coordinates %d of 64 groups: %v", id, n, per)
		}
	}
}

// The internal topic is created at the first group request with
// cluster.groups_partitions partitions, left out of topic listings
// (shown when asked for by name), and refused to clients' produce and
// delete.
func TestGroupsTopicInternal(t *testing.T) {
	n := runNode(t, t.TempDir(), func(c *config.Config) { withKafka(c); c.Cluster.GroupsPartitions = 4 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if md, err := n.svc.Metadata(service.MetadataRequest{Topics: []string{metadata.GroupsTopic}}); err != nil || md.Topics[0].Err == nil {
		t.Fatalf("the internal topic exists before any group request: %v %+v", err, md)
	}
	join := kmsg.NewPtrJoinGroupRequest()
	join.Version, join.Group, join.ProtocolType = 9, "gi", "consumer"
	join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = 10000, 10000
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name = "range"
	join.Protocols = append(join.Protocols, p)
	if jr, err := joinCoordinated(ctx, t, join, kafkaClient(t, []string{n.KafkaAddr()})); err != nil || jr.ErrorCode != kerr.MemberIDRequired.Code {
		t.Fatalf("join: %v %+v", err, jr)
	}
	md, err := n.svc.Metadata(service.MetadataRequest{Topics: []string{metadata.GroupsTopic}})
	if err != nil || md.Topics[0].Err != nil || len(md.Topics[0].Partitions) != 4 {
		t.Fatalf("asked for by name: %v %+v", err, md)
	}
	d, err := n.svc.DescribeTopic(metadata.GroupsTopic)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range d.Configs {
		if (c.Key == "retention_ms" || c.Key == "retention_bytes") && c.Value != "-1" {
			t.Errorf("%s = %s, want unlimited (nothing compacts the topic yet)", c.Key, c.Value)
		}
	}
	all, err := n.svc.Metadata(service.MetadataRequest{})
	if err != nil {
		t.Fatal(err)
	}
	list, err := n.svc.ListTopics()
	if err != nil {
		t.Fatal(err)
	}
	for _, tm := range all.Topics {
		if tm.Name == metadata.GroupsTopic {
			t.Errorf("the metadata of every topic lists %s", metadata.GroupsTopic)
		}
	}
	for _, ts := range list {
		if ts.Name == metadata.GroupsTopic {
			t.Errorf("the topic list shows %s", metadata.GroupsTopic)
		}
	}
	produced := make(chan error, 1)
	n.svc.Produce(nil, &service.ProduceRequest{PartitionRef: service.PartitionRef{Topic: metadata.GroupsTopic}, Records: []byte{0}},
		func(_ service.ProduceResult, err error) { produced <- err })
	if err := <-produced; !errors.Is(err, service.ErrAuthorization) {
		t.Errorf("a client's produce to %s: %v", metadata.GroupsTopic, err)
	}
	deleted := make(chan error, 1)
	n.svc.DeleteTopic(nil, &service.DeleteTopicRequest{Name: metadata.GroupsTopic}, func(_ metadata.TopicID, err error) { deleted <- err })
	if err := <-deleted; !errors.Is(err, service.ErrAuthorization) {
		t.Errorf("a client's delete of %s: %v", metadata.GroupsTopic, err)
	}
}

// waitGroupCoordinator waits until group's coordinator answers for it:
// the first group request creates __groups, whose partitions then elect
// primaries that load them (COORDINATOR_NOT_AVAILABLE,
// COORDINATOR_LOAD_IN_PROGRESS meanwhile), which a test of raw requests
// must not take for its answer.
func waitGroupCoordinator(t *testing.T, ctx context.Context, cl *kgo.Client, group string) {
	t.Helper()
	clusterWait(t, 30*time.Second, fmt.Sprintf("group %q's coordinator", group), func() bool {
		r := kmsg.NewPtrDescribeGroupsRequest()
		r.Groups = []string{group}
		resp, err := r.RequestWith(ctx, cl)
		return err == nil && len(resp.Groups) == 1 && resp.Groups[0].ErrorCode == 0
	})
}

// commitMetaOffsets stores a named consumer's offsets in n's metadata
// group, as CommitOffsets did before offsets moved to __groups: the
// metadata snapshot tests write metadata entries of a chosen size with
// it. It answers the first error.
func commitMetaOffsets(n *Node, consumer string, offs []service.OffsetCommit) error {
	ch := make(chan error, 1)
	err := n.group.Shard(metaShard).Post(func() {
		c := n.ctrl
		if c == nil {
			ch <- errors.New("the metadata group is not open on this node")
			return
		}
		if err := c.admit(true); err != nil {
			ch <- err
			return
		}
		c.commitOffsets(&service.CommitOffsetsRequest{Consumer: consumer, Offsets: offs}, func(entries []error, err error) {
			for _, e := range entries {
				if err == nil {
					err = e
				}
			}
			ch <- err
		})
	})
	if err != nil {
		return err
	}
	return <-ch
}

// metaPrimaryByRoute is the cluster's metadata primary, as the nodes' metadata
// routes name it.
func metaPrimaryByRoute(t *testing.T, tc *testCluster) *Node {
	t.Helper()
	var primary *Node
	clusterWait(t, 30*time.Second, "a metadata primary", func() bool {
		for _, n := range tc.nodes {
			if n != nil {
				if id, _ := n.metaRoute(); id == int32(n.self) && n.ctrl != nil {
					primary = n
					return true
				}
			}
		}
		return false
	})
	return primary
}
