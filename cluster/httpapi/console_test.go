package httpapi

import (
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/corestream/corestream/cluster/history"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/shard"
)

// fakeService answers the calls the console's routes make from fixed
// topics; every other call panics through the nil embedded interface.
type fakeService struct {
	service.Service
	self    int32
	topics  []service.TopicMetadata
	brokers []service.Broker
	// logOf is the log end of a partition this node leads (-1: it
	// does not lead it).
	logOf func(topic string, p int32) int64
}

func (f *fakeService) Identity() service.Identity {
	return service.Identity{NodeID: f.self, Version: "test"}
}
func (f *fakeService) Brokers() []service.Broker { return f.brokers }
func (f *fakeService) MetadataRoute() (int32, int32) {
	return 1, 3
}
func (f *fakeService) Metadata(service.MetadataRequest) (service.MetadataResult, error) {
	return service.MetadataResult{Brokers: f.brokers, MetadataPrimaryID: 1, MetadataGeneration: 3, Topics: f.topics}, nil
}
func (f *fakeService) DescribePartition(_ *shard.Shard, ref service.PartitionRef, done func(service.PartitionDetail, error)) {
	end := f.logOf(ref.Topic, ref.Partition)
	if end < 0 {
		done(service.PartitionDetail{}, service.Errorf(service.ErrNodeNotAvailable, "not the primary"))
		return
	}
	d := service.PartitionDetail{HighWatermark: end - 1, LogEndOffset: end, SizeBytes: 100 * end, LastStableOffset: end - 1}
	if ref.Partition%2 == 1 { // a transaction open from offset 2
		d.OpenTransactions, d.LastStableOffset = 1, 2
	}
	if ref.Partition%4 == 0 { // compacted
		d.Compacted, d.DirtyRatio = true, 0.25
	}
	go done(d, nil)
}

// fakeTopics are n topics of parts partitions each, partition p led by
// node p%nodes+1, with every third partition of the last topic offline.
func fakeTopics(n, parts, nodes int) []service.TopicMetadata {
	var out []service.TopicMetadata
	for i := range n {
		t := service.TopicMetadata{Name: fmt.Sprintf("t%02d", i), ID: metadata.TopicID{byte(i + 1)}, ReplicationFactor: 2}
		for p := range parts {
			lead := int32(p%nodes + 1)
			r := service.PartitionRoute{Partition: int32(p), PrimaryID: lead, Generation: 2, PreferredPrimaryID: lead,
				Replicas: []int32{lead, lead%int32(nodes) + 1}, InSync: []int32{lead, lead%int32(nodes) + 1}}
			if i == n-1 && p%3 == 0 {
				r.PrimaryID, r.Generation, r.InSync = -1, -1, nil
				r.Err = service.Errorf(service.ErrNodeNotAvailable, "down")
			}
			t.Partitions = append(t.Partitions, r)
		}
		out = append(out, t)
	}
	return out
}

// serveFake starts an API for svc on a loopback port; it stops with
// the test.
func serveFake(t *testing.T, svc *fakeService, addrs map[int32]string) *API {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := New(Config{Service: svc, Self: svc.self, HTTPAddrOf: func(id int32) string { return addrs[id] },
		Stats:   func() Stats { return Stats{ProduceRequests: int64(svc.self), ProducedBytes: 10 * int64(svc.self)} },
		History: fakeHistory{self: svc.self}}, ln)
	h.Serve()
	t.Cleanup(func() { h.Close() })
	return h
}

// fakeHistory is a node's two samples, its id in their figures.
type fakeHistory struct{ self int32 }

func (f fakeHistory) History() ([]history.Sample, int64) {
	id := int64(f.self)
	return []history.Sample{{TimeMs: 1000, ProducedBytes: id}, {TimeMs: 6000, ProducedBytes: 100 * id,
		Groups: []history.GroupLag{{Group: "g", Lag: id}}}}, 5000
}

func get(t *testing.T, u string) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

// The page is served at / with its assets, all embedded; nothing it
// loads comes from elsewhere, and every asset it names is there.
func TestConsoleServed(t *testing.T) {
	h := serveFake(t, &fakeService{self: 1}, nil)
	base := "http://" + h.Addr()
	status, hdr, page := get(t, base+"/")
	if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") || !strings.Contains(hdr.Get("Content-Security-Policy"), "default-src 'self'") {
		t.Fatalf("GET /: %d %v", status, hdr)
	}
	refs := regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(string(page), -1)
	if len(refs) < 2 {
		t.Fatalf("the page names %d assets; want its script and style", len(refs))
	}
	for _, r := range refs {
		if !strings.HasPrefix(r[1], "/console/") {
			t.Errorf("the page loads %s, not one of its embedded assets", r[1])
			continue
		}
		if status, _, body := get(t, base+r[1]); status != 200 || len(body) == 0 {
			t.Errorf("GET %s: %d, %d bytes", r[1], status, len(body))
		}
	}
	// Nothing embedded reaches outside the node.
	fs.WalkDir(consoleFS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := fs.ReadFile(consoleFS, path)
		if m := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/`).Find(b); m != nil {
			t.Errorf("%s names %s: the console fetches nothing from elsewhere", path, m)
		}
		return nil
	})
	// Every route the scripts call exists.
	js, _ := fs.ReadFile(consoleFS, "console.js")
	for _, route := range []string{"/v1/cluster", "/v1/cluster/stats", "/v1/topics", "/v1/partitions?", "/v1/rebalance"} {
		if !strings.Contains(string(js), `"`+route) {
			t.Errorf("console.js does not call %s", route)
		}
	}
	// The charts: the page loads their script before the console's (which
	// polls them), and has a place for every chart the script draws.
	charts, _ := fs.ReadFile(consoleFS, "charts.js")
	if !strings.Contains(string(charts), `"/v1/cluster/history"`) {
		t.Errorf("charts.js does not call /v1/cluster/history")
	}
	if c, j := strings.Index(string(page), "/console/charts.js"), strings.Index(string(page), "/console/console.js"); c < 0 || c > j {
		t.Errorf("the page loads charts.js at %d, console.js at %d: the charts' script must come first", c, j)
	}
	ids := regexp.MustCompile(`\{ id: "(chart-[a-z-]+)"`).FindAllStringSubmatch(string(charts), -1)
	if len(ids) < 6 {
		t.Errorf("charts.js defines %d charts; want produce and fetch bytes and records, under-replicated, group lag", len(ids))
	}
	for _, id := range ids {
		if !strings.Contains(string(page), `id="`+id[1]+`"`) {
			t.Errorf("the page has no place for chart %s", id[1])
		}
	}
	for _, path := range []string{"/console/missing.js", "/console/"} {
		if status, _, _ := get(t, base+path); status != 404 {
			t.Errorf("GET %s: %d, want 404", path, status)
		}
	}
}

// pagePartitions filters and pages, counting every match.
func TestHTTPPagePartitions(t *testing.T) {
	topics := fakeTopics(3, 10, 3) // t02 has 4 offline: partitions 0, 3, 6, 9
	cases := []struct {
		q           partitionsQuery
		total       int32
		first, last string
	}{
		{partitionsQuery{state: stateAll, limit: 100}, 30, "t00/0", "t02/9"},
		{partitionsQuery{state: stateAll, offset: 25, limit: 3}, 30, "t02/5", "t02/7"},
		{partitionsQuery{state: stateAll, offset: 30, limit: 3}, 30, "", ""},
		{partitionsQuery{topic: "t01", state: stateAll, limit: 100}, 10, "t01/0", "t01/9"},
		{partitionsQuery{state: stateOffline, limit: 2}, 4, "t02/0", "t02/3"},
		{partitionsQuery{state: stateOnline, primaryID: 2, limit: 100}, 9, "t00/1", "t02/7"},
		{partitionsQuery{topic: "t02", state: stateUnderReplicated, limit: 100}, 0, "", ""},
	}
	for _, c := range cases {
		got := pagePartitions(topics, c.q)
		name := func(i int) string {
			if i < 0 || i >= len(got.Partitions) {
				return ""
			}
			return fmt.Sprintf("%s/%d", got.Partitions[i].Topic, got.Partitions[i].Partition)
		}
		if got.Total != c.total || name(0) != c.first || name(len(got.Partitions)-1) != c.last || int32(len(got.Partitions)) > c.q.limit {
			t.Errorf("%+v: total %d, %s..%s (%d); want %d, %s..%s", c.q, got.Total, name(0), name(len(got.Partitions)-1),
				len(got.Partitions), c.total, c.first, c.last)
		}
	}
}

func TestHTTPParsePartitionsQuery(t *testing.T) {
	cases := []struct {
		query string
		want  partitionsQuery
		bad   string
	}{
		{"", partitionsQuery{state: stateAll, limit: partitionsPageDefault}, ""},
		{"topic=orders&state=offline&primary_id=3&offset=200&limit=1000", partitionsQuery{"orders", stateOffline, 3, 200, 1000}, ""},
		{"limit=1001", partitionsQuery{}, `"limit"`},
		{"limit=0", partitionsQuery{}, `"limit"`},
		{"state=down", partitionsQuery{}, `"state"`},
		{"primary_id=33", partitionsQuery{}, `"primary_id"`},
		{"page=2", partitionsQuery{}, `"page" is unknown`},
		{"topic=a/b", partitionsQuery{}, "topic"},
	}
	for _, c := range cases {
		q, _ := url.ParseQuery(c.query)
		got, err := parsePartitionsQuery(q)
		switch {
		case c.bad == "" && (err != nil || got != c.want):
			t.Errorf("%q: %+v %v, want %+v", c.query, got, err, c.want)
		case c.bad != "" && (err == nil || !strings.Contains(err.Error(), c.bad)):
			t.Errorf("%q: %v, want an error about %s", c.query, err, c.bad)
		}
	}
}

// GET /v1/partitions on node 1 answers every field, with the log
// figures of its own partitions and those node 2 answers for its own;
// node 3 is down, so its partitions' log is null.
func TestHTTPListPartitions(t *testing.T) {
	topics := fakeTopics(2, 9, 3)[:1] // t00: none offline
	addrs := map[int32]string{3: deadAddr(t)}
	leads := func(self int32) func(string, int32) int64 {
		return func(_ string, p int32) int64 {
			if p%3+1 == self {
				return int64(p) + 10
			}
			return -1
		}
	}
	n2 := serveFake(t, &fakeService{self: 2, topics: topics, logOf: leads(2)}, addrs)
	addrs[2] = n2.Addr()
	n1 := serveFake(t, &fakeService{self: 1, topics: topics, logOf: leads(1)}, addrs)
	addrs[1] = n1.Addr()

	status, _, raw := get(t, "http://"+n1.Addr()+"/v1/partitions?limit=9")
	if status != 200 {
		t.Fatalf("%d %s", status, raw)
	}
	// Every documented field is present, null included.
	var shape struct {
		Partitions []map[string]json.RawMessage `json:"partitions"`
	}
	json.Unmarshal(raw, &shape)
	for _, f := range []string{"topic", "partition", "primary_id", "generation", "preferred_primary_id", "replicas", "in_sync", "offline", "state", "error", "log"} {
		if _, ok := shape.Partitions[0][f]; !ok {
			t.Errorf("partition field %q missing: %s", f, raw)
		}
	}
	var got partitionList
	if err := json.Unmarshal(raw, &got); err != nil || got.Total != 9 || len(got.Partitions) != 9 {
		t.Fatalf("%v %s", err, raw)
	}
	for _, p := range got.Partitions {
		switch lead := p.Partition%3 + 1; {
		case lead == 3 && p.Log != nil:
			t.Errorf("partition %d (node 3, down): log %+v, want null", p.Partition, p.Log)
		case lead != 3 && (p.Log == nil || p.Log.LogEndOffset != int64(p.Partition)+10 || p.Log.HighWatermark != int64(p.Partition)+9):
			t.Errorf("partition %d (node %d): log %+v, want log end %d", p.Partition, lead, p.Log, p.Partition+10)
		case lead != 3:
			// The transaction and compaction figures, from this node's
			// primaries and from node 2's alike.
			wantOpen, wantLSO := int32(0), p.Log.HighWatermark
			if p.Partition%2 == 1 {
				wantOpen, wantLSO = 1, 2
			}
			if p.Log.OpenTransactions != wantOpen || p.Log.LastStableOffset != wantLSO {
				t.Errorf("partition %d: %d open transactions, LSO %d; want %d, %d", p.Partition, p.Log.OpenTransactions, p.Log.LastStableOffset, wantOpen, wantLSO)
			}
			if compacted := p.Partition%4 == 0; compacted != (p.Log.DirtyRatio != nil) || compacted && *p.Log.DirtyRatio != 0.25 {
				t.Errorf("partition %d: dirty ratio %v, want 0.25 only when compacted", p.Partition, p.Log.DirtyRatio)
			}
		}
	}
	if status, _, raw := get(t, "http://"+n1.Addr()+"/v1/partitions?topic=nope"); status != 404 || !strings.Contains(string(raw), "UNKNOWN_TOPIC_OR_PARTITION") {
		t.Errorf("an unknown topic: %d %s", status, raw)
	}
}

// GET /v1/cluster/stats has every node: the answering one's own
// figures, a peer's as it answered, and an error for a node down.
func TestHTTPClusterStats(t *testing.T) {
	addrs := map[int32]string{3: deadAddr(t)}
	brokers := []service.Broker{{ID: 1}, {ID: 2}, {ID: 3, HTTPAddr: addrs[3]}}
	n2 := serveFake(t, &fakeService{self: 2, brokers: brokers}, addrs)
	brokers[1].HTTPAddr = n2.Addr()
	n1 := serveFake(t, &fakeService{self: 1, brokers: brokers}, addrs)
	status, _, raw := get(t, "http://"+n1.Addr()+"/v1/cluster/stats")
	var got clusterStatsAnswer
	if err := json.Unmarshal(raw, &got); status != 200 || err != nil || len(got.Nodes) != 3 {
		t.Fatalf("%d %v %s", status, err, raw)
	}
	for i, n := range got.Nodes {
		id := int32(i + 1)
		if n.NodeID != id {
			t.Errorf("entry %d is node %d", i, n.NodeID)
		}
		if id < 3 && (n.Error != nil || n.ProduceRequests != int64(id) || n.ProducedBytes != 10*int64(id) || n.TimeMs == 0) {
			t.Errorf("node %d: %+v", id, n)
		}
		if id == 3 && n.Error == nil {
			t.Errorf("node 3 is down but answered %+v", n)
		}
	}
}

// GET /v1/cluster/history has every node: the answering one's own
// samples, a peer's as it answered, and an error for a node down; GET
// /v1/history is one node's.
func TestHTTPClusterHistory(t *testing.T) {
	addrs := map[int32]string{3: deadAddr(t)}
	brokers := []service.Broker{{ID: 1}, {ID: 2}, {ID: 3, HTTPAddr: addrs[3]}}
	n2 := serveFake(t, &fakeService{self: 2, brokers: brokers}, addrs)
	brokers[1].HTTPAddr = n2.Addr()
	n1 := serveFake(t, &fakeService{self: 1, brokers: brokers}, addrs)
	status, _, raw := get(t, "http://"+n1.Addr()+"/v1/cluster/history")
	var got clusterHistoryAnswer
	if err := json.Unmarshal(raw, &got); status != 200 || err != nil || len(got.Nodes) != 3 {
		t.Fatalf("%d %v %s", status, err, raw)
	}
	for i, n := range got.Nodes {
		id := int32(i + 1)
		if n.NodeID != id {
			t.Errorf("entry %d is node %d", i, n.NodeID)
		}
		if id < 3 && (n.Error != nil || n.IntervalMs != 5000 || len(n.Samples) != 2 || n.Samples[1].ProducedBytes != 100*int64(id) ||
			len(n.Samples[1].Groups) != 1 || n.Samples[1].Groups[0].Lag != int64(id)) {
			t.Errorf("node %d: %+v", id, n)
		}
		if id == 3 && (n.Error == nil || n.Samples == nil) {
			t.Errorf("node 3 is down but answered %+v", n)
		}
	}
	// A sample without groups answers an empty list, not null.
	if !strings.Contains(string(raw), `"groups":[]`) {
		t.Errorf("a sample without groups: %s", raw)
	}
	if status, _, raw := get(t, "http://"+n2.Addr()+"/v1/history?x=1"); status != 400 || !strings.Contains(string(raw), `\"x\" is unknown`) {
		t.Errorf("GET /v1/history?x=1: %d %s", status, raw)
	}
}

// The actions refuse a bad body where it arrives, before any hop.
func TestHTTPActionBodies(t *testing.T) {
	h := serveFake(t, &fakeService{self: 2}, nil)
	for _, c := range []struct{ path, body, want string }{
		{"/v1/rebalance", `{"moves_max": -1}`, `"moves_max"`},
		{"/v1/rebalance", `{"dry": true}`, `"dry"`},
		{"/v1/topics/t/partitions/0/primary", `{"node_id": 0}`, `"node_id"`},
		{"/v1/topics/t/partitions/99999/primary", `{"node_id": 1}`, `99999`},
	} {
		resp, err := http.Post("http://"+h.Addr()+c.path, "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		code, msg, _ := errorOf(t, raw)
		if resp.StatusCode != 400 || code != wire.ErrInvalidRequest.Name || !strings.Contains(msg, c.want) {
			t.Errorf("POST %s %s: %d %s %s; want 400 INVALID_REQUEST naming %s", c.path, c.body, resp.StatusCode, code, msg, c.want)
		}
	}
}

// The listing's own cost for 10,000 partitions: filtering, one page cut
// out and encoded (the service's Metadata and the log figures apart).
func BenchmarkListPartitions10k(b *testing.B) {
	topics := fakeTopics(10, 1000, 3)
	for _, limit := range []int32{100, 1000} {
		b.Run(fmt.Sprintf("page=%d", limit), func(b *testing.B) {
			for b.Loop() {
				page := pagePartitions(topics, partitionsQuery{state: stateAll, offset: 5000, limit: limit})
				if _, err := json.Marshal(page); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
