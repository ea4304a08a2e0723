package node

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/corestream/corestream/cluster/history"
	"github.com/corestream/corestream/shard/partition"
)

// The figures' history the console charts (cluster/history): every
// http.history_interval_ms a timer on the metadata shard, read on the
// node's clock, takes a sample of the figures /metrics serves and adds it
// to a bounded ring that GET /v1/history answers. The sample's cheap part
// is atomics and the route table; its gather (the led partitions' high
// watermarks and the coordinated groups' lag) asks the shards by message
// and waits, so it runs off the shard, on one goroutine per sample, at
// most one at a time, bounded by historyGatherTimeout: the timer that
// starts it is the shard's, so the sampler has no clock or ticker of its
// own. The sampler runs only where the HTTP API is served (the whole-node
// simulator serves none).

// historyGatherTimeout bounds one sample's gather: a shard that does not
// answer in time leaves its partitions out of the sample, as a scrape
// does (their records of that interval are not counted).
const historyGatherTimeout = 2 * time.Second

// historySampler takes the node's samples.
type historySampler struct {
	n     *Node
	ring  *history.Ring
	every time.Duration
	// busy is set while a sample is gathered; a tick that finds it set
	// takes none (at most one gather at a time).
	busy atomic.Bool
	// lastHW and producedRecords belong to the gather in flight (busy
	// orders the gathers one after another).
	// lastHW holds the high watermark of every partition this node led
	// at the last sample; producedRecords sums their advances, and
	// topicRecords the same advances by topic name (a topic deleted
	// keeps its count: at most one entry per topic the node ever led).
	lastHW          map[[20]byte]ledWatermark
	producedRecords int64
	topicRecords    map[string]int64
}

// ledWatermark is a partition this node leads: its topic and high
// watermark.
type ledWatermark struct {
	topic string
	hw    int64
}

// startHistory starts the sampler and returns it: the first sample is
// taken one interval after the metadata shard runs the post.
func (n *Node) startHistory() *historySampler {
	s := &historySampler{n: n, ring: history.NewRing(n.cfg.HTTP.HistorySamplesMax),
		every: time.Duration(n.cfg.HTTP.HistoryIntervalMs) * time.Millisecond}
	if s.every <= 0 || n.group == nil {
		return s
	}
	sh := n.group.Shard(metaShard)
	_ = sh.Post(func() { sh.AfterFunc(s.every, s.tick) }) // refused: the node is stopping
	return s
}

// tick takes a sample and arms the next. Runs on the metadata shard.
func (s *historySampler) tick() {
	if s.n.stopped.Load() {
		return
	}
	at := s.n.clock.Now()
	if s.busy.CompareAndSwap(false, true) {
		go func() {
			defer s.busy.Store(false)
			s.ring.Add(s.take(at))
		}()
	}
	s.n.group.Shard(metaShard).AfterFunc(s.every, s.tick)
}

// History implements httpapi.HistorySource.
func (s *historySampler) History() ([]history.Sample, int64) {
	return s.ring.Samples(), s.every.Milliseconds()
}

// take gathers the sample of at. REQUIRES: busy held.
func (s *historySampler) take(at time.Time) history.Sample {
	n := s.n
	ctx, cancel := context.WithTimeout(context.Background(), historyGatherTimeout)
	defer cancel()
	st := n.svc.Meter().Stats()
	c := n.leadership()
	lead, gen := n.metaRoute()
	out := history.Sample{TimeMs: at.UnixMilli(),
		ProduceRequests: st.ProduceRequests, ProducedBytes: st.ProducedBytes, ProduceErrors: st.ProduceErrors,
		FetchRequests: st.FetchRequests, FetchedBytes: st.FetchedBytes, FetchErrors: st.FetchErrors,
		FetchedRecords: n.svc.Meter().FetchedRecords(),
		PrimaryMoves:   int64(n.balanceStats.Finished.Load()), MetadataGeneration: gen, MetadataPrimaryID: lead,
		PartitionsLed: int32(c.led), UnderReplicated: int32(c.underReplicated), Offline: int32(c.offline)}
	for _, m := range n.roster.nodes() {
		if n.alive(int32(m.ID)) {
			out.NodesAlive++
		}
	}
	hws := n.ledWatermarks(ctx)
	if s.topicRecords == nil {
		s.topicRecords = map[string]int64{}
	}
	for k, w := range hws {
		if last, ok := s.lastHW[k]; ok && w.hw > last.hw {
			s.producedRecords += w.hw - last.hw
			s.topicRecords[w.topic] += w.hw - last.hw
		} else if _, seen := s.topicRecords[w.topic]; !seen {
			s.topicRecords[w.topic] = 0 // first led at this sample: shown from 0
		}
	}
	s.lastHW = hws
	out.ProducedRecords = s.producedRecords
	out.Topics, out.TopicsOmitted = topicCounts(s.topicRecords, history.TopicsPerSampleMax)
	// The partition lags are bounded by their own limit; the groups'
	// totals by theirs (the ring cuts what is over).
	lags := n.groups.LagSeries(ctx, history.GroupPartitionsPerSampleMax)
	out.Groups = make([]history.GroupLag, 0, len(lags.Groups))
	for _, g := range lags.Groups {
		out.Groups = append(out.Groups, history.GroupLag{Group: g.Name, Lag: g.Lag})
	}
	out.GroupPartitions = make([]history.GroupPartitionLag, 0, len(lags.Partitions))
	for _, p := range lags.Partitions {
		out.GroupPartitions = append(out.GroupPartitions, history.GroupPartitionLag{Group: p.Group, Topic: p.Topic, Partition: p.Partition, Lag: p.Lag})
	}
	// LagSeries counts the groups and the partitions it left out as one.
	out.GroupsOmitted = max(lags.Omitted, 0)
	return out
}

// topicCounts are counts as TopicRecords, the first limit by name, and
// how many topics were left out. Pure.
func topicCounts(counts map[string]int64, limit int) ([]history.TopicRecords, int) {
	out := make([]history.TopicRecords, 0, len(counts))
	for topic, n := range counts {
		out = append(out, history.TopicRecords{Topic: topic, Records: n})
	}
	slices.SortFunc(out, func(a, b history.TopicRecords) int { return strings.Compare(a.Topic, b.Topic) })
	if len(out) > limit {
		return out[:limit], len(out) - limit
	}
	return out, 0
}

// ledWatermarks are the high watermarks of the partitions this node
// leads, asked of each shard once; a shard that does not answer within
// ctx leaves its partitions out.
func (n *Node) ledWatermarks(ctx context.Context) map[[20]byte]ledWatermark {
	type answer map[[20]byte]ledWatermark
	ch := make(chan answer, len(n.hosts)) // buffered: a late answer never blocks its shard
	asked := 0
	for i, h := range n.hosts {
		if h == nil {
			continue
		}
		if n.group.Shard(i).Post(func() {
			a := answer{}
			h.Each(func(r *partition.Replica) {
				if r.IsPrimary() {
					a[shardKey(r.Config().TopicID, r.Config().Partition)] = ledWatermark{topic: r.Config().Topic, hw: r.HighWatermark()}
				}
			})
			ch <- a
		}) == nil {
			asked++
		}
	}
	out := map[[20]byte]ledWatermark{}
	for range asked {
		select {
		case a := <-ch:
			for k, hw := range a {
				out[k] = hw
			}
		case <-ctx.Done():
			return out
		}
	}
	return out
}
