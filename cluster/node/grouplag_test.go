package node

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/client"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/wire"
	dto "github.com/prometheus/client_model/go"
)

// lagFixture is a node with topic "lagged" of two partitions, five
// records produced to partition 0 and two to partition 1 (each log also
// starts with its primary's control batch), group "g1" committed at 1 on
// partition 0 and 2 on partition 1, and "g2" at 0 on partition 0. It
// returns the node and the partitions' high watermarks.
func lagFixture(t *testing.T, mutate func(*config.Config)) (*testNode, [2]int64) {
	t.Helper()
	n := runNode(t, t.TempDir(), mutate)
	s := service.Service(n.svc)
	created := svcCreate(t, s, "lagged", 2)
	for p, count := range []int{5, 2} {
		ref := service.PartitionRef{Topic: "lagged", Partition: int32(p), TopicID: created.ID, Generation: service.GenerationUnknown}
		for i := range count {
			if _, err := await(func(done func(service.ProduceResult, error)) {
				s.Produce(nil, &service.ProduceRequest{PartitionRef: ref, Records: oneBatch(t, strconv.Itoa(i))}, done)
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	commit := func(group string, offs ...service.OffsetCommit) {
		t.Helper()
		commitWait(t, []service.Service{s}, group, offs...)
	}
	commit("g1", service.OffsetCommit{Topic: "lagged", Partition: 0, Offset: 1}, service.OffsetCommit{Topic: "lagged", Partition: 1, Offset: 2})
	commit("g2", service.OffsetCommit{Topic: "lagged", Partition: 0, Offset: 0})
	var hw [2]int64
	for p := range hw {
		d, err := await(func(done func(service.PartitionDetail, error)) {
			s.DescribePartition(nil, service.PartitionRef{Topic: "lagged", Partition: int32(p), Generation: service.GenerationUnknown}, done)
		})
		if err != nil {
			t.Fatal(err)
		}
		hw[p] = d.HighWatermark
	}
	if hw[0] < 5 || hw[1] < 2 {
		t.Fatalf("high watermarks %v after 5 and 2 records", hw)
	}
	return n, hw
}

// commitWait commits offs for group through whichever of svcs
// coordinates it, retrying while the group's coordinator is being made
// (the internal topic created, a partition loading, an election).
func commitWait(t *testing.T, svcs []service.Service, group string, offs ...service.OffsetCommit) {
	t.Helper()
	clusterWait(t, 30*time.Second, "a commit of group "+group, func() bool {
		for _, s := range svcs {
			entries, err := await(func(done func([]error, error)) {
				s.CommitOffsets(nil, &service.CommitOffsetsRequest{Consumer: group, Offsets: offs}, done)
			})
			if err == nil {
				for _, e := range entries {
					if e != nil {
						t.Fatalf("commit of group %s: %v", group, e)
					}
				}
				return true
			}
		}
		return false
	})
}

// lagSeries reads the lag families of a scrape: group totals by group,
// partition lags by "group/topic/partition", and the omitted count.
func lagSeries(fams map[string]*dto.MetricFamily) (groups, parts map[string]float64, omitted float64) {
	label := func(m *dto.Metric, name string) string {
		for _, l := range m.GetLabel() {
			if l.GetName() == name {
				return l.GetValue()
			}
		}
		return ""
	}
	groups, parts = map[string]float64{}, map[string]float64{}
	for _, m := range fams["corestream_group_lag_records"].GetMetric() {
		groups[label(m, "group")] = m.GetGauge().GetValue()
	}
	for _, m := range fams["corestream_group_partition_lag_records"].GetMetric() {
		parts[label(m, "group")+"/"+label(m, "topic")+"/"+label(m, "partition")] = m.GetGauge().GetValue()
	}
	for _, m := range fams["corestream_group_lag_series_omitted"].GetMetric() {
		omitted = m.GetGauge().GetValue()
	}
	return groups, parts, omitted
}

// A group's lag on /metrics is the high watermark minus its committed
// offset, per partition and summed per group, for the partitions this
// node leads (all of them on one node).
func TestMetricGroupLag(t *testing.T) {
	n, hw := lagFixture(t, nil)
	groups, parts, omitted := lagSeries(scrape(t, n.Node))
	g1, g2 := float64(hw[0]-1+hw[1]-2), float64(hw[0])
	wantParts := map[string]float64{"g1/lagged/0": float64(hw[0] - 1), "g1/lagged/1": float64(hw[1] - 2), "g2/lagged/0": g2}
	if len(parts) != len(wantParts) {
		t.Errorf("partition series %v, want %v", parts, wantParts)
	}
	for k, v := range wantParts {
		if parts[k] != v {
			t.Errorf("%s: lag %v, want %v (all %v)", k, parts[k], v, parts)
		}
	}
	if groups["g1"] != g1 || groups["g2"] != g2 || len(groups) != 2 || omitted != 0 {
		t.Errorf("group totals %v omitted %v, want g1 %v, g2 %v, none omitted", groups, omitted, g1, g2)
	}
}

// http.group_lag_series_max bounds the series: with 1, one group's
// total and one partition series are served and the rest counted as
// omitted; with 0, none.
func TestMetricGroupLagBounded(t *testing.T) {
	n, hw := lagFixture(t, func(c *config.Config) { c.HTTP.GroupLagSeriesMax = 1 })
	groups, parts, omitted := lagSeries(scrape(t, n.Node))
	// g1 is first by name; g2 is past the bound (1 omitted), and of
	// g1's two partitions one is served (1 omitted).
	if g1 := float64(hw[0] - 1 + hw[1] - 2); len(groups) != 1 || groups["g1"] != g1 || len(parts) != 1 || omitted != 2 {
		t.Fatalf("bound 1: groups %v, partitions %v, omitted %v; want g1 = %v, one partition, 2 omitted", groups, parts, omitted, g1)
	}
	n.cfg.HTTP.GroupLagSeriesMax = 0
	groups, parts, _ = lagSeries(scrape(t, n.Node))
	if len(groups)+len(parts) != 0 {
		t.Fatalf("bound 0: groups %v, partitions %v; want none", groups, parts)
	}
}

// In a cluster each group's lag is on its coordinator's /metrics only,
// the primary of its __groups partition: groups committed through the
// SDK after groups moved there (their offsets are not in the metadata
// group) show there, against every partition's high watermark (each
// node holds a replica of each), and on no other node.
func TestMetricGroupLagCluster(t *testing.T) {
	tc := startCluster(t, 3, nil)
	ctx, cl := tc.dial(t, 90*time.Second)
	createTopic(t, ctx, cl, client.TopicSpec{Name: "lc", Partitions: 2, ReplicationFactor: 3})
	produceAll(t, ctx, cl, "lc", 0, 60)
	var hw [2]int64
	for p := range hw {
		d, err := cl.DescribePartition(ctx, "lc", int32(p))
		if err != nil {
			t.Fatal(err)
		}
		hw[p] = d.HighWatermark
	}
	names := []string{"lag-a", "lag-b", "lag-c", "lag-d", "lag-e", "lag-f"}
	coordinator := map[string]int32{}
	for i, name := range names {
		offs := []wire.OffsetCommit{{Topic: "lc", Partition: 0, Offset: int64(i)}, {Topic: "lc", Partition: 1, Offset: 1}}
		clusterWait(t, 30*time.Second, "a commit of "+name, func() bool { return cl.CommitOffsets(ctx, name, offs) == nil })
		fc, err := cl.FindCoordinator(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		coordinator[name] = fc.NodeID
	}
	var got string
	clusterWait(t, 30*time.Second, "each group's lag on its coordinator only", func() bool {
		reported := map[string][]int32{}
		ok := true
		var b strings.Builder
		for i, n := range tc.nodes {
			groups, parts, omitted := lagSeries(scrape(t, n))
			fmt.Fprintf(&b, "node %d: %v %v omitted %v; ", i+1, groups, parts, omitted)
			for g, lag := range groups {
				reported[g] = append(reported[g], int32(i+1))
				j := slices.Index(names, g)
				want0, want1 := float64(hw[0]-int64(j)), float64(hw[1]-1)
				if j < 0 || lag != want0+want1 || parts[g+"/lc/0"] != want0 || parts[g+"/lc/1"] != want1 {
					ok = false
				}
			}
			ok = ok && omitted == 0
		}
		for _, name := range names {
			ok = ok && slices.Equal(reported[name], []int32{coordinator[name]})
		}
		got = b.String()
		return ok
	})
	t.Logf("coordinators %v; %s", coordinator, got)
}

// GET /v1/groups lists the groups with their partitions and total lag,
// filtered and paged; GET /v1/groups/{group} answers committed, end and
// lag per partition; an unknown group is 404 UNKNOWN_CONSUMER.
func TestHTTPGroups(t *testing.T) {
	n, hw := lagFixture(t, func(c *config.Config) { c.Node.HTTPAddr = "127.0.0.1:0" })
	g1 := hw[0] - 1 + hw[1] - 2
	base := "http://" + n.HTTPAddr()
	var list struct {
		Total  int `json:"total"`
		Groups []struct {
			Group      string  `json:"group"`
			Partitions int     `json:"partitions"`
			Lag        int64   `json:"lag"`
			EndUnknown int     `json:"end_unknown"`
			Members    *int    `json:"members"`
			Error      *string `json:"error"`
		} `json:"groups"`
	}
	code, _, raw := httpRaw(t, "GET", base+"/v1/groups", "", nil)
	if code != http.StatusOK || json.Unmarshal(raw, &list) != nil {
		t.Fatalf("GET /v1/groups: %d %s", code, raw)
	}
	if list.Total != 2 || len(list.Groups) != 2 || list.Groups[0].Group != "g1" || list.Groups[0].Lag != g1 || list.Groups[0].Partitions != 2 ||
		list.Groups[1].Group != "g2" || list.Groups[1].Lag != hw[0] || list.Groups[0].EndUnknown != 0 || list.Groups[0].Error != nil {
		t.Fatalf("GET /v1/groups: %s", raw)
	}
	code, _, raw = httpRaw(t, "GET", base+"/v1/groups?filter=2&limit=5", "", nil)
	if code != http.StatusOK || json.Unmarshal(raw, &list) != nil || list.Total != 1 || len(list.Groups) != 1 || list.Groups[0].Group != "g2" {
		t.Fatalf("GET /v1/groups?filter=2: %d %s", code, raw)
	}
	var detail struct {
		Group      string `json:"group"`
		Lag        int64  `json:"lag"`
		Partitions []struct {
			Topic     string `json:"topic"`
			Partition int32  `json:"partition"`
			Committed int64  `json:"committed"`
			End       *int64 `json:"end"`
			Lag       *int64 `json:"lag"`
		} `json:"partitions"`
		Members []any `json:"members"`
	}
	code, _, raw = httpRaw(t, "GET", base+"/v1/groups/g1", "", nil)
	if code != http.StatusOK || json.Unmarshal(raw, &detail) != nil {
		t.Fatalf("GET /v1/groups/g1: %d %s", code, raw)
	}
	// Committed without joining (a named consumer's commits): the
	// coordinator holds the group, Empty and without members.
	if detail.Lag != g1 || len(detail.Partitions) != 2 || len(detail.Members) != 0 {
		t.Fatalf("GET /v1/groups/g1: %s", raw)
	}
	for i, want := range []struct{ committed, end, lag int64 }{{1, hw[0], hw[0] - 1}, {2, hw[1], hw[1] - 2}} {
		p := detail.Partitions[i]
		if p.Partition != int32(i) || p.Committed != want.committed || p.End == nil || *p.End != want.end || p.Lag == nil || *p.Lag != want.lag {
			t.Errorf("partition %d: %s", i, raw)
		}
	}
	// Asked of its coordinator once that partition of __groups has one
	// (503 COORDINATOR_NOT_AVAILABLE until then).
	clusterWait(t, 20*time.Second, "an answer on nobody's coordinator", func() bool {
		code, _, raw = httpRaw(t, "GET", base+"/v1/groups/nobody", "", nil)
		return code != http.StatusServiceUnavailable
	})
	if c, _, _ := errorOf(t, raw); code != http.StatusNotFound || c != "UNKNOWN_CONSUMER" {
		t.Fatalf("GET /v1/groups/nobody: %d %s", code, raw)
	}
	for _, bad := range []string{"/v1/groups?limit=0", "/v1/groups?sort=name", "/v1/groups/g1?x=1"} {
		if code, _, raw := httpRaw(t, "GET", base+bad, "", nil); code != http.StatusBadRequest {
			t.Errorf("GET %s: %d %s, want 400", bad, code, raw)
		}
	}
}

// In a cluster a group is described by its coordinator, the primary of
// its __groups partition: asked of any node, GET /v1/groups/{group} is
// forwarded there (the answer names it and was served by it) with the
// offsets committed after groups moved to __groups, members included;
// GET /v1/groups, asked of any node, lists the groups of every node's
// coordinators, each with its coordinator and lag.
func TestHTTPGroupsForwardedToCoordinator(t *testing.T) {
	ports := freePorts(t, 3)
	tc := startCluster(t, 3, func(c *config.Config) {
		c.HTTP.JWTSecret = "jwt"
		for i := range c.Cluster.Nodes {
			c.Cluster.Nodes[i].HTTPAddr = ports[i]
		}
		c.Node.HTTPAddr = ports[c.Node.ID-1]
	})
	base := func(i int) string { return "http://" + tc.nodes[i].HTTPAddr() }
	clusterWait(t, 30*time.Second, "create over HTTP", func() bool {
		code, _ := httpDo(t, "POST", base(0)+"/v1/topics", map[string]any{"name": "web", "partitions": 2, "replication_factor": 3}, nil)
		return code == http.StatusCreated
	})
	for p := range 2 {
		clusterWait(t, 20*time.Second, "produce over HTTP", func() bool {
			code, _ := httpDo(t, "POST", base(0)+"/v1/topics/web/partitions/"+strconv.Itoa(p)+"/records",
				map[string]any{"records": []map[string]any{{"value_text": "a"}, {"value_text": "b"}, {"value_text": "c"}}}, nil)
			return code == http.StatusOK
		})
	}
	svcs := make([]service.Service, len(tc.nodes))
	for i, n := range tc.nodes {
		svcs[i] = n.svc
	}
	// Groups on more than one coordinator: each name is its own
	// partition of __groups, and the partitions' primaries spread over
	// the nodes.
	names := []string{"web-a", "web-b", "web-c", "web-d", "web-e", "web-f"}
	for _, name := range names {
		commitWait(t, svcs, name, service.OffsetCommit{Topic: "web", Partition: 0, Offset: 1}, service.OffsetCommit{Topic: "web", Partition: 1, Offset: 2})
	}
	coordinator := map[string]int32{}
	for _, name := range names {
		clusterWait(t, 20*time.Second, "every node to name the coordinator of "+name, func() bool {
			var ids []int32
			for _, n := range tc.nodes {
				c, err := n.svc.FindCoordinator(name)
				if err != nil {
					return false
				}
				ids = append(ids, c.NodeID)
			}
			coordinator[name] = ids[0]
			return ids[1] == ids[0] && ids[2] == ids[0]
		})
	}
	// And a group with a member (it reads "web" and commits as it goes).
	ctx, _ := tc.dial(t, 90*time.Second)
	startSDKMember(t, ctx, tc.brokers(), "web-members", "web", "m1", newGroupLedger(), 3*time.Second)
	var lag float64
	for _, name := range names {
		for i := range tc.nodes {
			var body map[string]any
			var hdr http.Header
			clusterWait(t, 20*time.Second, name+" on node "+strconv.Itoa(i+1), func() bool {
				code, h, raw := httpRaw(t, "GET", base(i)+"/v1/groups/"+name, "", nil)
				hdr = h
				return code == http.StatusOK && json.Unmarshal(raw, &body) == nil && body["end_unknown"] == float64(0)
			})
			c := coordinator[name]
			if body["coordinator_id"] != float64(c) || (int32(i+1) != c && hdr.Get("X-Corestream-Served-By") != strconv.Itoa(int(c))) {
				t.Fatalf("%s on node %d: answered %v, served by %q; want its coordinator %d", name, i+1, body, hdr.Get("X-Corestream-Served-By"), c)
			}
			if lag == 0 {
				lag = body["lag"].(float64)
			}
			if body["lag"] != lag || lag <= 0 {
				t.Fatalf("%s on node %d: lag %v, want %v (every group committed the same, positive)", name, i+1, body["lag"], lag)
			}
		}
	}
	clusterWait(t, 30*time.Second, "web-members with its member, described on any node", func() bool {
		for i := range tc.nodes {
			var body struct {
				Members []GroupMemberJSON `json:"members"`
				State   *string           `json:"state"`
			}
			code, _, raw := httpRaw(t, "GET", base(i)+"/v1/groups/web-members", "", nil)
			if code != http.StatusOK || json.Unmarshal(raw, &body) != nil || len(body.Members) != 1 || body.Members[0].ClientID != "m1" {
				return false
			}
		}
		return true
	})
	type listed struct {
		Group         string  `json:"group"`
		CoordinatorID int32   `json:"coordinator_id"`
		Lag           float64 `json:"lag"`
		Members       *int    `json:"members"`
		Error         *string `json:"error"`
	}
	for i := range tc.nodes {
		var list struct {
			Total           int      `json:"total"`
			NodesUnanswered []int32  `json:"nodes_unanswered"`
			Groups          []listed `json:"groups"`
		}
		code, _, raw := httpRaw(t, "GET", base(i)+"/v1/groups?filter=web-&limit=1000", "", nil)
		if code != http.StatusOK || json.Unmarshal(raw, &list) != nil {
			t.Fatalf("GET /v1/groups on node %d: %d %s", i+1, code, raw)
		}
		if list.Total != len(names)+1 || len(list.Groups) != list.Total || len(list.NodesUnanswered) != 0 {
			t.Fatalf("GET /v1/groups on node %d: %s; want %v and web-members, every node answering", i+1, raw, names)
		}
		for j, g := range list.Groups {
			if g.Group == "web-members" {
				if g.Members == nil || *g.Members != 1 || g.Error != nil {
					t.Errorf("node %d listed %+v; want one member", i+1, g)
				}
				continue
			}
			if g.Group != names[j] || g.CoordinatorID != coordinator[g.Group] || g.Lag != lag || g.Error != nil {
				t.Errorf("node %d listed %+v; want %s coordinated by node %d with lag %v", i+1, g, names[j], coordinator[names[j]], lag)
			}
		}
		code, _, raw = httpRaw(t, "GET", base(i)+"/v1/groups?filter=web-&offset=2&limit=2", "", nil)
		if code != http.StatusOK || json.Unmarshal(raw, &list) != nil || list.Total != len(names)+1 || len(list.Groups) != 2 ||
			list.Groups[0].Group != names[2] || list.Groups[1].Group != names[3] {
			t.Fatalf("GET /v1/groups?offset=2&limit=2 on node %d: %d %s", i+1, code, raw)
		}
	}
	t.Logf("coordinators %v", coordinator)
}

// GroupMemberJSON is one member in a group's description.
type GroupMemberJSON struct {
	ClientID string `json:"client_id"`
}

// A group's lag on /metrics counts every partition it committed, as
// its primary has the partition's end, whether or not the coordinator's
// node holds a replica of it: with a topic of factor 1 spread over three
// nodes, each coordinator's figures are the primaries' high watermarks
// less the commits, the figures the client's ListOffsets (the CLI's
// `group describe`) reads.
func TestMetricGroupLagPrimaryEnds(t *testing.T) {
	tc := startCluster(t, 3, nil)
	ctx, cl := tc.dial(t, 90*time.Second)
	const parts = 6
	createTopic(t, ctx, cl, client.TopicSpec{Name: "solo", Partitions: parts, ReplicationFactor: 1})
	produceAll(t, ctx, cl, "solo", 0, 120)
	end := func(p int32) int64 {
		t.Helper()
		lo, err := cl.ListOffsets(ctx, "solo", p, wire.TimestampLatest)
		if err != nil {
			t.Fatal(err)
		}
		return lo.Offset
	}
	names := []string{"ends-a", "ends-b", "ends-c", "ends-d"}
	coordinator := map[string]int32{}
	for _, name := range names {
		var offs []wire.OffsetCommit
		for p := range int32(parts) {
			offs = append(offs, wire.OffsetCommit{Topic: "solo", Partition: p, Offset: 1})
		}
		clusterWait(t, 30*time.Second, "a commit of "+name, func() bool { return cl.CommitOffsets(ctx, name, offs) == nil })
		fc, err := cl.FindCoordinator(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		coordinator[name] = fc.NodeID
	}
	var ends [parts]int64
	var want float64
	for p := range int32(parts) {
		ends[p] = end(p)
		want += float64(ends[p] - 1)
	}
	// Some partition has no replica on some coordinator's node: the case
	// a coordinator reading its own replicas left out.
	md, err := cl.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var routes []wire.PartitionRoute
	for _, tm := range md.Topics {
		if tm.Name == "solo" {
			routes = tm.Partitions
		}
	}
	away := 0
	for _, name := range names {
		for _, p := range routes {
			if !slices.Contains(p.Replicas, coordinator[name]) {
				away++
			}
		}
	}
	if away == 0 {
		t.Fatalf("every partition of solo has a replica on every coordinator (%v, %+v): the test proves nothing", coordinator, routes)
	}
	var got string
	clusterWait(t, 30*time.Second, "each group's lag over every partition on its coordinator", func() bool {
		var b strings.Builder
		ok := true
		for _, name := range names {
			groups, partLags, _ := lagSeries(scrape(t, tc.nodes[coordinator[name]-1]))
			fmt.Fprintf(&b, "%s on node %d: %v; ", name, coordinator[name], groups[name])
			ok = ok && groups[name] == want
			for p := range parts {
				ok = ok && partLags[fmt.Sprintf("%s/solo/%d", name, p)] == float64(ends[p]-1)
			}
		}
		got = b.String()
		return ok
	})
	t.Logf("coordinators %v, %d (group, partition) pairs away from their coordinator; %s", coordinator, away, got)
}
