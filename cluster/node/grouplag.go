package node

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"time"

	"github.com/corestream/corestream/cluster/groups"
	"github.com/corestream/corestream/cluster/httpapi"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/shard"

	"github.com/prometheus/client_golang/prometheus"
)

// Consumer-group lag: a group's (or named consumer's) committed offset
// of a partition against the partition's high watermark. A group's
// committed offsets are held by its coordinator, the primary of its
// __groups partition (groups_log.go; the metadata group keeps only what
// was committed before groups moved there, read as a fallback); a high
// watermark is known to the partition's replicas. So /metrics serves, on
// each node, the lag of the groups this node coordinates, against the
// high watermarks of the partitions it holds a replica of (a follower's
// trails its primary's by a round trip): each group is reported by one
// node, and a scrape asks each of this node's shards once and no other
// node. A partition this node holds no replica of is left out. The HTTP
// API (cluster/httpapi, groups.go) asks every primary instead, as its
// partition listing does.

// groupLagScrapeTimeout bounds the scrape's wait for the metadata shard
// and the shards' watermarks: a shard that does not answer in time
// leaves its partitions out of this scrape.
const groupLagScrapeTimeout = 2 * time.Second

// errGroupLagTimeout is the wait for the metadata shard running past
// the scrape's deadline.
var errGroupLagTimeout = errors.New("node: the metadata shard did not answer the group offsets in time")

// groupOffsets is one consumer's committed offsets.
type groupOffsets struct {
	name    string
	offsets []service.CommittedOffset
}

// onMetaState runs read on the metadata shard with the applied state
// (nil before the metadata group opens) and waits for it within ctx.
func (n *Node) onMetaState(ctx context.Context, read func(st *metadata.State)) error {
	done := make(chan struct{})
	err := n.group.Shard(metaShard).Post(func() {
		defer close(done)
		if c := n.ctrl; c != nil {
			read(c.state)
			return
		}
		read(nil)
	})
	if err != nil {
		return err
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return errGroupLagTimeout
	}
}

// coordinatedGroups reads the committed offsets of the first groupsMax
// groups by name that this node coordinates, and how many it
// coordinates in all. A group is one its loaded coordinators hold, or a
// name with offsets only in the metadata group whose coordinator this
// node is; its offsets are the coordinator's, with the metadata group's
// filling the partitions the coordinator has none of, as
// FetchGroupOffsets answers them.
func (n *Node) coordinatedGroups(ctx context.Context, groupsMax int) ([]groupOffsets, int, error) {
	r := n.groups
	if r == nil {
		return nil, 0, nil
	}
	// The groups of the loaded coordinators, and which partitions they
	// coordinate, asked of every shard.
	type held struct {
		names  []string
		loaded []int32
	}
	per, err := groupsAllWait(ctx, r, func(gs *groupsShard) held {
		var h held
		for _, pt := range gs.sorted() {
			if pt.loaded {
				h.loaded = append(h.loaded, pt.p)
				for _, d := range pt.coord.List() {
					h.names = append(h.names, d.Name)
				}
			}
		}
		return h
	})
	if err != nil {
		return nil, 0, err
	}
	mine := map[string]bool{}
	loaded := map[int32]bool{}
	for _, h := range per {
		for _, name := range h.names {
			mine[name] = true
		}
		for _, p := range h.loaded {
			loaded[p] = true
		}
	}
	var old []string
	if err := n.onMetaState(ctx, func(st *metadata.State) {
		if st != nil {
			old = st.Consumers()
		}
	}); err != nil {
		return nil, 0, err
	}
	if routes, err := n.svc.groupsRoutes(); err == nil && len(routes) > 0 {
		for _, name := range old {
			if loaded[groupsPartitionOf(name, len(routes))] {
				mine[name] = true
			}
		}
	}
	names := make([]string, 0, len(mine))
	for name := range mine {
		names = append(names, name)
	}
	sort.Strings(names)
	total := len(names)
	names = names[:min(len(names), groupsMax)]
	oldOffs := make([][]service.CommittedOffset, len(names))
	if err := n.onMetaState(ctx, func(st *metadata.State) {
		if st == nil {
			return
		}
		for i, name := range names {
			for _, e := range st.CommittedAll(name) {
				oldOffs[i] = append(oldOffs[i], service.CommittedOffset{Topic: e.Topic, Partition: e.Partition, TopicID: e.TopicID,
					Offset: e.Offset, Metadata: e.Metadata})
			}
		}
	}); err != nil {
		return nil, 0, err
	}
	// Each chosen group's offsets, read on its coordinator's shard.
	offsPer, err := groupsAllWait(ctx, r, func(gs *groupsShard) map[string][]groups.Offset {
		out := map[string][]groups.Offset{}
		for _, pt := range gs.parts {
			if !pt.loaded {
				continue
			}
			for _, name := range names {
				if offs := pt.coord.Offsets(name, nil); len(offs) > 0 {
					out[name] = offs
				}
			}
		}
		return out
	})
	if err != nil {
		return nil, 0, err
	}
	have := map[string][]groups.Offset{}
	for _, m := range offsPer {
		for name, offs := range m {
			have[name] = offs
		}
	}
	out := make([]groupOffsets, len(names))
	for i, name := range names {
		out[i] = groupOffsets{name: name, offsets: mergeGroupOffsets(have[name], oldOffs[i], true)}
	}
	return out, total, nil
}

// heldWatermark is a partition this node holds a replica of: its
// topic's id and the replica's high watermark.
type heldWatermark struct {
	topicID metadata.TopicID
	hw      int64
}

// heldWatermarks are the high watermarks of the partitions among keys
// that this node holds a replica of (leads or follows), asked of each
// owning shard once; a shard that does not answer within ctx leaves its
// partitions out.
func (n *Node) heldWatermarks(ctx context.Context, keys []metadata.OffsetKey) map[metadata.OffsetKey]heldWatermark {
	view := n.view.Load()
	byShard := map[int][]metadata.OffsetKey{}
	for _, k := range keys {
		t := view.Topics[k.Topic]
		if t == nil || k.Partition < 0 || int(k.Partition) >= t.Partitions() {
			continue
		}
		i := n.shardOf(t.ID, k.Partition)
		byShard[i] = append(byShard[i], k)
	}
	type answer map[metadata.OffsetKey]heldWatermark
	ch := make(chan answer, len(byShard)) // buffered: a late answer never blocks its shard
	asked := 0
	for i, ks := range byShard {
		sh := n.group.Shard(i)
		if sh.Post(func() { ch <- n.shardWatermarks(sh, view, ks) }) == nil {
			asked++
		}
	}
	out := map[metadata.OffsetKey]heldWatermark{}
	for range asked {
		select {
		case a := <-ch:
			for k, w := range a {
				out[k] = w
			}
		case <-ctx.Done():
			return out
		}
	}
	return out
}

// shardWatermarks reads, on sh, the high watermarks of sh's replicas of
// the partitions among keys, primaries and followers alike.
// REQUIRES: running on sh.
func (n *Node) shardWatermarks(sh *shard.Shard, view *View, keys []metadata.OffsetKey) map[metadata.OffsetKey]heldWatermark {
	out := map[metadata.OffsetKey]heldWatermark{}
	h := n.hosts[sh.ID()]
	if h == nil {
		return out
	}
	for _, k := range keys {
		t := view.Topics[k.Topic]
		if r := h.Get(shardKey(t.ID, k.Partition)); r != nil {
			out[k] = heldWatermark{topicID: t.ID, hw: r.HighWatermark()}
		}
	}
	return out
}

// groupLagOf is a group's lag on a partition: the records between its
// committed offset and the high watermark, 0 when it is at or past it
// (a commit past the end is possible after a truncation).
func groupLagOf(committed, hw int64) int64 { return max(hw-committed, 0) }

// groupLagCollector serves the lag of the groups this node coordinates
// on the partitions it holds a replica of, bounded by seriesMax
// (http.group_lag_series_max): the totals of the first seriesMax of its
// groups by name, and at most seriesMax group and partition series.
type groupLagCollector struct {
	n         *Node
	seriesMax int
}

var (
	groupLagDesc = prometheus.NewDesc("corestream_group_lag_records",
		"Records between a consumer group's (or named consumer's) committed offsets and the high watermarks, summed over its partitions this node holds a replica of; served by the group's coordinator only (one node per group).",
		[]string{"group"}, nil)
	groupPartitionLagDesc = prometheus.NewDesc("corestream_group_partition_lag_records",
		"Records between a group's committed offset of a partition and the partition's high watermark, on the group's coordinator, for the partitions it holds a replica of (a follower's high watermark trails the primary's); a partition without a replica on this node is left out.",
		[]string{"group", "topic", "partition"}, nil)
	groupLagOmittedDesc = prometheus.NewDesc("corestream_group_lag_series_omitted",
		"Group lag series this node left out of the scrape by http.group_lag_series_max, of the groups it coordinates (groups past the bound, partitions past it); sum over nodes for the cluster's.",
		nil, nil)
)

func (c *groupLagCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- groupLagDesc
	ch <- groupPartitionLagDesc
	ch <- groupLagOmittedDesc
}

func (c *groupLagCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), groupLagScrapeTimeout)
	defer cancel()
	s := c.n.groupLagSeries(ctx, c.seriesMax)
	for _, g := range s.groups {
		ch <- prometheus.MustNewConstMetric(groupLagDesc, prometheus.GaugeValue, float64(g.lag), g.name)
	}
	for _, p := range s.partitions {
		ch <- prometheus.MustNewConstMetric(groupPartitionLagDesc, prometheus.GaugeValue, float64(p.lag),
			p.group, p.topic, strconv.Itoa(int(p.partition)))
	}
	ch <- prometheus.MustNewConstMetric(groupLagOmittedDesc, prometheus.GaugeValue, float64(s.omitted))
}

// groupLagSet is what a scrape serves: groups' totals and partitions'
// lags, and how many series the bound left out.
type groupLagSet struct {
	groups     []groupLagTotal
	partitions []groupPartitionLag
	omitted    int
}

type groupLagTotal struct {
	name string
	lag  int64
}

type groupPartitionLag struct {
	group, topic string
	partition    int32
	lag          int64
}

// groupLagSeries computes the lag series of the groups this node
// coordinates on the partitions it holds, within seriesMax.
func (n *Node) groupLagSeries(ctx context.Context, seriesMax int) groupLagSet {
	var out groupLagSet
	if seriesMax <= 0 || n.group == nil {
		return out
	}
	groups, total, err := n.coordinatedGroups(ctx, seriesMax)
	if err != nil {
		return out
	}
	out.omitted = total - len(groups)
	seen := map[metadata.OffsetKey]bool{}
	var keys []metadata.OffsetKey
	for _, g := range groups {
		for _, e := range g.offsets {
			k := metadata.OffsetKey{Topic: e.Topic, Partition: e.Partition}
			if e.Offset >= 0 && !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	hws := n.heldWatermarks(ctx, keys)
	for _, g := range groups {
		var sum int64
		held := false
		for _, e := range g.offsets {
			w, ok := hws[metadata.OffsetKey{Topic: e.Topic, Partition: e.Partition}]
			if !ok || e.Offset < 0 || (!e.TopicID.IsZero() && e.TopicID != w.topicID) {
				continue
			}
			lag := groupLagOf(e.Offset, w.hw)
			sum += lag
			held = true
			if len(out.partitions) < seriesMax {
				out.partitions = append(out.partitions, groupPartitionLag{group: g.name, topic: e.Topic, partition: e.Partition, lag: lag})
			} else {
				out.omitted++
			}
		}
		if held {
			out.groups = append(out.groups, groupLagTotal{name: g.name, lag: sum})
		}
	}
	return out
}

// groupsSource is the node's side of the HTTP API's groups routes
// (httpapi.GroupsSource): this node's coordinators, and the names with
// offsets in the applied metadata from before groups moved to __groups.
type groupsSource struct{ n *Node }

// OwnGroups implements httpapi.GroupsSource: the groups of this node's
// loaded coordinators, asked of every shard.
func (g groupsSource) OwnGroups() []string {
	var out []string
	if r := g.n.groups; r != nil {
		ctx, cancel := context.WithTimeout(context.Background(), groupLagScrapeTimeout)
		defer cancel()
		per, _ := groupsAllWait(ctx, r, func(gs *groupsShard) []string {
			var names []string
			for _, pt := range gs.parts {
				if pt.loaded {
					for _, d := range pt.coord.List() {
						names = append(names, d.Name)
					}
				}
			}
			return names
		})
		for _, names := range per {
			out = append(out, names...)
		}
	}
	sort.Strings(out)
	return out
}

// OldGroupNames implements httpapi.GroupsSource.
func (g groupsSource) OldGroupNames(ctx context.Context) ([]string, error) {
	var out []string
	if err := g.n.onMetaState(ctx, func(st *metadata.State) {
		if st != nil {
			out = st.Consumers()
		}
	}); err != nil {
		return nil, err
	}
	return out, nil
}

// GroupMembers implements httpapi.GroupsSource: the group as this
// node's coordinator holds it, when this node coordinates it (asked of
// the coordinator's shard).
func (g groupsSource) GroupMembers(name string) (httpapi.GroupMembership, bool) {
	if g.n.svc == nil || g.n.groups == nil {
		return httpapi.GroupMembership{}, false
	}
	type answer struct {
		d   groups.Description
		err error
	}
	ch := make(chan answer, 1) // buffered: a late answer never blocks its shard
	groupCall(g.n.svc, nil, name, func(c *groups.Coordinator, reply func(groups.Description, error)) {
		reply(c.Describe(name))
	}, func(d groups.Description, err error) { ch <- answer{d, err} })
	ctx, cancel := context.WithTimeout(context.Background(), groupLagScrapeTimeout)
	defer cancel()
	var a answer
	select {
	case a = <-ch:
	case <-ctx.Done():
		return httpapi.GroupMembership{}, false
	}
	if a.err != nil {
		return httpapi.GroupMembership{}, false
	}
	d := a.d
	m := httpapi.GroupMembership{State: d.State.String(), ProtocolType: d.ProtocolType, Protocol: d.Protocol,
		Generation: d.Generation, Members: make([]httpapi.GroupMember, 0, len(d.Members))}
	for _, mb := range d.Members {
		m.Members = append(m.Members, httpapi.GroupMember{MemberID: mb.ID, InstanceID: mb.InstanceID, ClientID: mb.ClientID, Host: mb.Host})
	}
	return m, true
}
