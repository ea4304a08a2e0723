package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/corestream/corestream/cluster/service/wirecode"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/wire"
)

// The cluster-wide partition listing (GET /v1/partitions) and the log
// figures each primary answers for it (POST /v1/partitions/log). Any node
// answers the listing from its metadata; the log figures (high
// watermark, log end, size) live on each partition's primary, so the
// answering node asks every primary of the page for its own, at once, in
// one request each. The listing is paged so that a cluster of thousands
// of partitions costs one page per request, for the node and for the
// console that shows it.

// Bounds of the partition listing.
const (
	// partitionsPageDefault and partitionsPageMax bound one page.
	partitionsPageDefault = 100
	partitionsPageMax     = 1000
	// partitionsLogTimeout bounds the wait for the log figures of a page,
	// local and remote: a primary that does not answer in time leaves its
	// partitions' "log" null rather than holding the page.
	partitionsLogTimeout = 2 * time.Second
)

// Partition states for the listing's state filter.
const (
	stateAll             = "all"
	stateOnline          = "online"
	stateUnderReplicated = "under_replicated"
	stateOffline         = "offline"
)

// partitionList answers GET /v1/partitions.
type partitionList struct {
	// Total counts the partitions that pass the filter; Offset and Limit
	// are the page's.
	Total      int32           `json:"total"`
	Offset     int32           `json:"offset"`
	Limit      int32           `json:"limit"`
	Partitions []partitionInfo `json:"partitions"`
}

// partitionInfo is one partition's route with its log figures (null
// when its primary did not answer them: none, down, or too slow).
type partitionInfo struct {
	Topic              string        `json:"topic"`
	Partition          int32         `json:"partition"`
	PrimaryID          int32         `json:"primary_id"`
	Generation         int32         `json:"generation"`
	PreferredPrimaryID int32         `json:"preferred_primary_id"`
	Replicas           []int32       `json:"replicas"`
	InSync             []int32       `json:"in_sync"`
	Offline            []int32       `json:"offline"`
	State              string        `json:"state"`
	Error              *string       `json:"error"`
	Log                *partitionLog `json:"log"`
}

// partitionLog is a partition's log as its primary sees it.
type partitionLog struct {
	LogStartOffset int64 `json:"log_start_offset"`
	HighWatermark  int64 `json:"high_watermark"`
	LogEndOffset   int64 `json:"log_end_offset"`
	SizeBytes      int64 `json:"size_bytes"`
	// LastStableOffset is where read_committed reads stop (the first
	// offset of the oldest open transaction, else the high watermark);
	// OpenTransactions counts the producers with one open here.
	LastStableOffset int64 `json:"last_stable_offset"`
	OpenTransactions int32 `json:"open_transactions"`
	// DirtyRatio is a compacted topic's share of sealed bytes not yet
	// cleaned on the primary; null for a topic that is not compacted.
	DirtyRatio *float64 `json:"dirty_ratio"`
}

// partitionsLogBody is the body of POST /v1/partitions/log.
type partitionsLogBody struct {
	Partitions []partitionName `json:"partitions"`
}

// partitionName names one partition.
type partitionName struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// partitionsLogAnswer answers POST /v1/partitions/log, in the order
// asked: the figures of the partitions this node leads, null for the
// others.
type partitionsLogAnswer struct {
	NodeID int32           `json:"node_id"`
	Logs   []*partitionLog `json:"logs"`
}

func (partitionList) httpAnswer()       {}
func (partitionsLogAnswer) httpAnswer() {}

// partitionsQuery is GET /v1/partitions's query.
type partitionsQuery struct {
	topic     string
	state     string
	primaryID int32 // 0: any
	offset    int32
	limit     int32
}

// parsePartitionsQuery reads the listing's query: every parameter
// optional, each checked.
func parsePartitionsQuery(q url.Values) (partitionsQuery, error) {
	var pq partitionsQuery
	if err := checkQuery(q, "topic", "state", "primary_id", "offset", "limit"); err != nil {
		return pq, err
	}
	if t, ok := q["topic"]; ok {
		if err := wire.ValidateTopicName(t[0]); err != nil {
			return pq, err
		}
		pq.topic = t[0]
	}
	var err error
	if pq.state, err = queryEnum(q, "state", stateAll, stateAll, stateOnline, stateUnderReplicated, stateOffline); err != nil {
		return pq, err
	}
	id, err := queryInt(q, "primary_id", 0, 1, wire.NodesMax)
	if err != nil {
		return pq, err
	}
	off, err := queryInt(q, "offset", 0, 0, 1<<31-1)
	if err != nil {
		return pq, err
	}
	lim, err := queryInt(q, "limit", partitionsPageDefault, 1, partitionsPageMax)
	if err != nil {
		return pq, err
	}
	pq.primaryID, pq.offset, pq.limit = int32(id), int32(off), int32(lim)
	return pq, nil
}

// partitionState is a route's state: offline without a primary,
// under_replicated with fewer in sync than replicas, else online.
func partitionState(p service.PartitionRoute) string {
	switch {
	case p.PrimaryID < 0:
		return stateOffline
	case len(p.InSync) < len(p.Replicas):
		return stateUnderReplicated
	}
	return stateOnline
}

// pagePartitions filters the topics' partitions by pq and cuts out its
// page. It is pure: the topics come from the service's Metadata.
func pagePartitions(topics []service.TopicMetadata, pq partitionsQuery) partitionList {
	out := partitionList{Offset: pq.offset, Limit: pq.limit, Partitions: []partitionInfo{}}
	for _, t := range topics {
		if pq.topic != "" && t.Name != pq.topic {
			continue
		}
		for _, p := range t.Partitions {
			st := partitionState(p)
			if (pq.state != stateAll && st != pq.state) || (pq.primaryID != 0 && p.PrimaryID != pq.primaryID) {
				continue
			}
			if out.Total >= pq.offset && int32(len(out.Partitions)) < pq.limit {
				pi := partitionInfo{Topic: t.Name, Partition: p.Partition, PrimaryID: p.PrimaryID, Generation: p.Generation,
					PreferredPrimaryID: p.PreferredPrimaryID, Replicas: nonNil(p.Replicas), InSync: nonNil(p.InSync),
					Offline: nonNil(p.Offline), State: st}
				if p.Err != nil {
					name := wirecode.CodeOf(p.Err).Name
					pi.Error = &name
				}
				out.Partitions = append(out.Partitions, pi)
			}
			out.Total++
		}
	}
	return out
}

func (h *API) listPartitions(w http.ResponseWriter, r *http.Request) {
	pq, err := parsePartitionsQuery(r.URL.Query())
	if err != nil {
		h.fail(w, err)
		return
	}
	md, err := h.svcOf(r).Metadata(service.MetadataRequest{})
	if err != nil {
		h.fail(w, err)
		return
	}
	if pq.topic != "" && !slices.ContainsFunc(md.Topics, func(t service.TopicMetadata) bool { return t.Name == pq.topic }) {
		h.fail(w, wire.Errorf(wire.ErrUnknownTopicOrPartition, "topic %q does not exist", pq.topic))
		return
	}
	out := pagePartitions(md.Topics, pq)
	ctx, cancel := context.WithTimeout(r.Context(), partitionsLogTimeout)
	defer cancel()
	h.fillLogs(ctx, out.Partitions)
	writeJSON(w, http.StatusOK, out)
}

// fillLogs sets the log figures of ps from their primaries: this node's
// own from the service, every other primary's in one request to it, all
// at once. A primary that fails or is late within ctx leaves its
// partitions' figures null.
func (h *API) fillLogs(ctx context.Context, ps []partitionInfo) {
	byNode := map[int32][]int{}
	for i, p := range ps {
		if p.PrimaryID > 0 {
			byNode[p.PrimaryID] = append(byNode[p.PrimaryID], i)
		}
	}
	var wg sync.WaitGroup
	var mu sync.Mutex // guards ps[i].Log across the goroutines below
	for id, idx := range byNode {
		names := make([]partitionName, len(idx))
		for j, i := range idx {
			names[j] = partitionName{Topic: ps[i].Topic, Partition: ps[i].Partition}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var logs []*partitionLog
			if id == h.self {
				logs = h.localLogs(ctx, names)
			} else if addr := h.httpAddrs(id); addr != "" {
				logs = h.remoteLogs(ctx, addr, names)
			}
			mu.Lock()
			for j, l := range logs {
				if j < len(idx) {
					ps[idx[j]].Log = l
				}
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
}

// localLogs are the log figures of the partitions this node leads among
// names (nil for the others), from the service's DescribePartition, all
// asked at once and awaited within ctx.
func (h *API) localLogs(ctx context.Context, names []partitionName) []*partitionLog {
	type answer struct {
		i int
		l *partitionLog
	}
	out := make([]*partitionLog, len(names))
	ch := make(chan answer, len(names)) // buffered: a late completion never blocks its shard
	for i, n := range names {
		ref := service.PartitionRef{Topic: n.Topic, Partition: n.Partition, Generation: service.GenerationUnknown}
		h.svcCtx(ctx).DescribePartition(nil, ref, func(d service.PartitionDetail, err error) {
			if err != nil {
				ch <- answer{i, nil}
				return
			}
			l := &partitionLog{LogStartOffset: d.LogStartOffset, HighWatermark: d.HighWatermark,
				LogEndOffset: d.LogEndOffset, SizeBytes: d.SizeBytes, LastStableOffset: d.LastStableOffset,
				OpenTransactions: d.OpenTransactions}
			if d.Compacted {
				l.DirtyRatio = &d.DirtyRatio
			}
			ch <- answer{i, l}
		})
	}
	for range names {
		select {
		case a := <-ch:
			out[a.i] = a.l
		case <-ctx.Done():
			return out
		}
	}
	return out
}

// remoteLogs asks the node at addr for the log figures of names.
func (h *API) remoteLogs(ctx context.Context, addr string, names []partitionName) []*partitionLog {
	body, _ := json.Marshal(partitionsLogBody{Partitions: names})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.schemeOf()+"://"+addr+"/v1/partitions/log", bytes.NewReader(body))
	if err != nil {
		return nil
	}
	onBehalf(ctx, req)
	resp, err := h.client.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var a partitionsLogAnswer
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&a) != nil || len(a.Logs) != len(names) {
		return nil
	}
	return a.Logs
}

func (h *API) partitionsLog(w http.ResponseWriter, r *http.Request) {
	var in partitionsLogBody
	if _, ok := h.readJSON(w, r, &in); !ok {
		return
	}
	if len(in.Partitions) > partitionsPageMax {
		h.fail(w, wire.Errorf(wire.ErrInvalidRequest, "body field \"partitions\" has %d entries; at most %d", len(in.Partitions), partitionsPageMax))
		return
	}
	for i, p := range in.Partitions {
		if err := wire.ValidateTopicName(p.Topic); err != nil {
			h.fail(w, wire.Errorf(wire.ErrInvalidTopicName, "body field \"partitions[%d].topic\": %v", i, err))
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), partitionsLogTimeout)
	defer cancel()
	writeJSON(w, http.StatusOK, partitionsLogAnswer{NodeID: h.self, Logs: h.localLogs(ctx, in.Partitions)})
}
