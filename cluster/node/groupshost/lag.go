package groupshost

import (
	"context"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/corestream/corestream/cluster/groups"
	"github.com/corestream/corestream/cluster/httpapi"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/node/nodesvc"
	"github.com/corestream/corestream/cluster/service"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Consumer-group lag: a group's (or named consumer's) committed offset
// of a partition against the partition's high watermark as its primary
// has it, 0 when the commit is at or past it; a partition without a
// commit has none. A group's committed offsets are held by its
// coordinator, the primary of its __groups partition (host.go; the
// metadata group keeps only what was committed before groups moved
// there, read as a fallback). So /metrics serves, on each node, the lag
// of the groups this node coordinates (each group is reported by one
// node), against the ends the partitions' primaries answer
// (Deps.Ends: this node's own shards, and one question to each other
// primary), the same ends the HTTP API (cluster/httpapi, groups.go) and
// `group describe` read: one figure of lag everywhere. A partition
// whose primary does not answer within the scrape's deadline is left
// out of that scrape.

// groupLagScrapeTimeout bounds the scrape's wait for the metadata shard
// and the primaries' ends: a shard or a primary that does not answer in
// time leaves its partitions out of this scrape.
const groupLagScrapeTimeout = 2 * time.Second

// groupOffsets is one consumer's committed offsets.
type groupOffsets struct {
	name    string
	offsets []service.CommittedOffset
}

// coordinatedGroups reads the committed offsets of the first groupsMax
// groups by name that this node coordinates, and how many it
// coordinates in all. A group is one its loaded coordinators hold, or a
// name with offsets only in the metadata group whose coordinator this
// node is; its offsets are the coordinator's, with the metadata group's
// filling the partitions the coordinator has none of, as
// FetchGroupOffsets answers them.
func (h *Host) coordinatedGroups(ctx context.Context, groupsMax int) ([]groupOffsets, int, error) {
	if h == nil || h.data == nil {
		return nil, 0, nil
	}
	// The groups of the loaded coordinators, and which partitions they
	// coordinate, asked of every shard.
	type held struct {
		names  []string
		loaded []int32
	}
	per, err := groupsAllWait(ctx, h, func(gs *groupsShard) held {
		var hd held
		for _, pt := range gs.sorted() {
			if pt.loaded {
				hd.loaded = append(hd.loaded, pt.p)
				for _, d := range pt.coord.List() {
					hd.names = append(hd.names, d.Name)
				}
			}
		}
		return hd
	})
	if err != nil {
		return nil, 0, err
	}
	mine := map[string]bool{}
	loaded := map[int32]bool{}
	for _, hd := range per {
		for _, name := range hd.names {
			mine[name] = true
		}
		for _, p := range hd.loaded {
			loaded[p] = true
		}
	}
	var old []string
	if err := h.d.MetaState(ctx, func(st *metadata.State) {
		if st != nil {
			old = st.Consumers()
		}
	}); err != nil {
		return nil, 0, err
	}
	if routes, err := h.data.GroupsRoutes(); err == nil && len(routes) > 0 {
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
	if err := h.d.MetaState(ctx, func(st *metadata.State) {
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
	offsPer, err := groupsAllWait(ctx, h, func(gs *groupsShard) map[string][]groups.Offset {
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
		out[i] = groupOffsets{name: name, offsets: nodesvc.MergeGroupOffsets(have[name], oldOffs[i], true)}
	}
	return out, total, nil
}

// End is a partition's end as its primary has it: its topic's id and
// its high watermark.
type End struct {
	TopicID metadata.TopicID
	HW      int64
}

// groupLagOf is a group's lag on a partition: the records between its
// committed offset and the high watermark, 0 when it is at or past it
// (a commit past the end is possible after a truncation).
func groupLagOf(committed, hw int64) int64 { return max(hw-committed, 0) }

// lagCollector serves the lag of the groups this node coordinates,
// bounded by seriesMax
// (http.group_lag_series_max): the totals of the first seriesMax of its
// groups by name, and at most seriesMax group and partition series.
type lagCollector struct {
	h         *Host
	seriesMax int
}

// LagCollector is the Prometheus collector of h's groups' lag, bounded
// by seriesMax (http.group_lag_series_max). A nil host serves no group.
func (h *Host) LagCollector(seriesMax int) prometheus.Collector {
	return &lagCollector{h: h, seriesMax: seriesMax}
}

var (
	groupLagDesc = prometheus.NewDesc("corestream_group_lag_records",
		"Records between a consumer group's (or named consumer's) committed offsets and the partitions' high watermarks as their primaries have them, summed over its committed partitions; served by the group's coordinator only (one node per group).",
		[]string{"group"}, nil)
	groupPartitionLagDesc = prometheus.NewDesc("corestream_group_partition_lag_records",
		"Records between a group's committed offset of a partition and the partition's high watermark as its primary has it, on the group's coordinator; a partition whose primary did not answer the scrape in time is left out.",
		[]string{"group", "topic", "partition"}, nil)
	groupLagOmittedDesc = prometheus.NewDesc("corestream_group_lag_series_omitted",
		"Group lag series this node left out of the scrape by http.group_lag_series_max, of the groups it coordinates (groups past the bound, partitions past it); sum over nodes for the cluster's.",
		nil, nil)
)

func (c *lagCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- groupLagDesc
	ch <- groupPartitionLagDesc
	ch <- groupLagOmittedDesc
}

func (c *lagCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), groupLagScrapeTimeout)
	defer cancel()
	s := c.h.LagSeries(ctx, c.seriesMax)
	for _, g := range s.Groups {
		ch <- prometheus.MustNewConstMetric(groupLagDesc, prometheus.GaugeValue, float64(g.Lag), g.Name)
	}
	for _, p := range s.Partitions {
		ch <- prometheus.MustNewConstMetric(groupPartitionLagDesc, prometheus.GaugeValue, float64(p.Lag),
			p.Group, p.Topic, strconv.Itoa(int(p.Partition)))
	}
	ch <- prometheus.MustNewConstMetric(groupLagOmittedDesc, prometheus.GaugeValue, float64(s.Omitted))
}

// LagSet is what a scrape serves: groups' totals and partitions' lags,
// and how many series the bound left out.
type LagSet struct {
	Groups     []GroupLag
	Partitions []PartitionLag
	Omitted    int
}

// GroupLag is a group's lag summed over its committed partitions.
type GroupLag struct {
	Name string
	Lag  int64
}

// PartitionLag is a group's lag on one partition.
type PartitionLag struct {
	Group, Topic string
	Partition    int32
	Lag          int64
}

// LagSeries computes the lag series of the groups this node
// coordinates, within seriesMax. A nil host
// has none.
func (h *Host) LagSeries(ctx context.Context, seriesMax int) LagSet {
	var out LagSet
	if seriesMax <= 0 || h == nil {
		return out
	}
	groups, total, err := h.coordinatedGroups(ctx, seriesMax)
	if err != nil {
		return out
	}
	out.Omitted = total - len(groups)
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
	var hws map[metadata.OffsetKey]End
	if h.d.Ends != nil {
		hws = h.d.Ends(ctx, keys)
	}
	for _, g := range groups {
		var sum int64
		held := false
		for _, e := range g.offsets {
			w, ok := hws[metadata.OffsetKey{Topic: e.Topic, Partition: e.Partition}]
			if !ok || e.Offset < 0 || (!e.TopicID.IsZero() && e.TopicID != w.TopicID) {
				continue
			}
			lag := groupLagOf(e.Offset, w.HW)
			sum += lag
			held = true
			if len(out.Partitions) < seriesMax {
				out.Partitions = append(out.Partitions, PartitionLag{Group: g.name, Topic: e.Topic, Partition: e.Partition, Lag: lag})
			} else {
				out.Omitted++
			}
		}
		if held {
			out.Groups = append(out.Groups, GroupLag{Name: g.name, Lag: sum})
		}
	}
	return out
}

// The host is the node's side of the HTTP API's groups routes
// (httpapi.GroupsSource): this node's coordinators, and the names with
// offsets in the applied metadata from before groups moved to __groups.
var _ httpapi.GroupsSource = (*Host)(nil)

// OwnGroups implements httpapi.GroupsSource: the groups of this node's
// loaded coordinators, asked of every shard.
func (h *Host) OwnGroups() []string {
	var out []string
	if h != nil {
		ctx, cancel := context.WithTimeout(context.Background(), groupLagScrapeTimeout)
		defer cancel()
		per, _ := groupsAllWait(ctx, h, func(gs *groupsShard) []string {
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
func (h *Host) OldGroupNames(ctx context.Context) ([]string, error) {
	var out []string
	if h == nil {
		return nil, nil
	}
	if err := h.d.MetaState(ctx, func(st *metadata.State) {
		if st != nil {
			out = st.Consumers()
		}
	}); err != nil {
		return nil, err
	}
	return out, nil
}

// GroupMembers implements httpapi.GroupsSource: the group as this
// node's coordinator holds it, when this node coordinates it (the
// service's DescribeGroup, asked of the coordinator's shard).
func (h *Host) GroupMembers(name string) (httpapi.GroupMembership, bool) {
	if h == nil || h.data == nil {
		return httpapi.GroupMembership{}, false
	}
	type answer struct {
		d   service.GroupDescription
		err error
	}
	ch := make(chan answer, 1) // buffered: a late answer never blocks its shard
	h.data.DescribeGroup(nil, name, func(d service.GroupDescription, err error) { ch <- answer{d, err} })
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
	m := httpapi.GroupMembership{State: d.State, ProtocolType: d.ProtocolType, Protocol: d.Protocol,
		Generation: d.Generation, Members: make([]httpapi.GroupMember, 0, len(d.Members))}
	for _, mb := range d.Members {
		var assigned []httpapi.GroupAssignedTopic
		if d.ProtocolType == "consumer" {
			assigned = consumerAssignment(mb.Assignment)
		}
		m.Members = append(m.Members, httpapi.GroupMember{MemberID: mb.MemberID, InstanceID: mb.InstanceID, ClientID: mb.ClientID, Host: mb.Host,
			Assignment: assigned})
	}
	return m, true
}

// consumerAssignment reads a member's assignment in Kafka's consumer
// protocol (ConsumerProtocolAssignment, which Kafka clients and the
// native SDK both send), topics in name order and each topic's
// partitions ascending; empty when b is empty or does not parse.
func consumerAssignment(b []byte) []httpapi.GroupAssignedTopic {
	out := []httpapi.GroupAssignedTopic{}
	var a kmsg.ConsumerMemberAssignment
	if len(b) == 0 || a.ReadFrom(b) != nil {
		return out
	}
	for _, t := range a.Topics {
		ps := slices.Clone(t.Partitions)
		slices.Sort(ps)
		out = append(out, httpapi.GroupAssignedTopic{Topic: t.Topic, Partitions: ps})
	}
	slices.SortFunc(out, func(x, y httpapi.GroupAssignedTopic) int { return strings.Compare(x.Topic, y.Topic) })
	return out
}
