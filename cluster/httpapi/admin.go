package httpapi

import (
	"net/http"
	"time"

	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/wire"
)

// The operator actions the CLI has on the binary protocol (rebalance,
// move a primary), on HTTP for scripts and the console, and the traffic
// figures the console draws its rates from. Actions run on the metadata
// primary, forwarded there like a topic's creation.

// Bounds of the actions and figures.
const (
	// movePrimaryTimeout bounds a move: the target must catch up and win
	// its election.
	movePrimaryTimeout = 10 * time.Second
	// statsGatherTimeout bounds the wait for one node's figures in GET
	// /v1/cluster/stats: a node down or slow is reported, not waited for.
	statsGatherTimeout = time.Second
)

// Stats are one node's traffic figures since it started: the counters
// behind corestream_produced_bytes_total and its kin (docs/operations.md).
// A reader takes rates from two samples and their TimeMs. Requests are
// counted when answered, errors included (ProduceErrors, FetchErrors of
// them), as corestream_service_request_duration_seconds_count counts
// them.
type Stats struct {
	ProduceRequests int64
	ProducedBytes   int64
	ProduceErrors   int64
	FetchRequests   int64
	FetchedBytes    int64
	FetchErrors     int64
}

// rebalanceBody is the body of POST /v1/rebalance.
type rebalanceBody struct {
	DryRun   bool  `json:"dry_run"`
	MovesMax int64 `json:"moves_max"`
}

// rebalanceAnswer answers POST /v1/rebalance: the plan in execution
// order, and whether it started.
type rebalanceAnswer struct {
	Started bool          `json:"started"`
	Moves   []primaryMove `json:"moves"`
}

// primaryMove is one planned move.
type primaryMove struct {
	Topic      string `json:"topic"`
	Partition  int32  `json:"partition"`
	FromNodeID int32  `json:"from_node_id"`
	ToNodeID   int32  `json:"to_node_id"`
}

// movePrimaryBody is the body of POST /v1/topics/{t}/partitions/{p}/primary.
type movePrimaryBody struct {
	NodeID int64 `json:"node_id"`
}

// movePrimaryAnswer is the partition's primary after the move.
type movePrimaryAnswer struct {
	Topic      string `json:"topic"`
	Partition  int32  `json:"partition"`
	PrimaryID  int32  `json:"primary_id"`
	Generation int32  `json:"generation"`
}

// statsAnswer answers GET /v1/stats: this node's figures.
type statsAnswer struct {
	NodeID          int32   `json:"node_id"`
	TimeMs          int64   `json:"time_ms"`
	ProduceRequests int64   `json:"produce_requests"`
	ProducedBytes   int64   `json:"produced_bytes"`
	ProduceErrors   int64   `json:"produce_errors"`
	FetchRequests   int64   `json:"fetch_requests"`
	FetchedBytes    int64   `json:"fetched_bytes"`
	FetchErrors     int64   `json:"fetch_errors"`
	Error           *string `json:"error"`
}

// clusterStatsAnswer answers GET /v1/cluster/stats: every node's
// figures, as each answered (error set, figures 0, where it did not).
type clusterStatsAnswer struct {
	Nodes []statsAnswer `json:"nodes"`
}

func (rebalanceAnswer) httpAnswer()    {}
func (movePrimaryAnswer) httpAnswer()  {}
func (statsAnswer) httpAnswer()        {}
func (clusterStatsAnswer) httpAnswer() {}

func (h *API) rebalance(w http.ResponseWriter, r *http.Request) {
	var in rebalanceBody
	body, ok := h.readJSON(w, r, &in)
	if !ok {
		return
	}
	if in.MovesMax < 0 || in.MovesMax > wire.PartitionsPerTopicMax {
		h.fail(w, wire.Errorf(wire.ErrInvalidRequest, "body field \"moves_max\" is %d; give 0 (no bound but the plan's) or 1..%d", in.MovesMax, wire.PartitionsPerTopicMax))
		return
	}
	if !h.onMetadataPrimary(w, r, body) {
		return
	}
	res, err := await(func(done func(service.RebalanceResult, error)) {
		h.svcOf(r).Rebalance(nil, &service.RebalanceRequest{DryRun: in.DryRun, MovesMax: uint32(in.MovesMax)}, done)
	})
	if err != nil {
		h.fail(w, err)
		return
	}
	out := rebalanceAnswer{Started: res.Started, Moves: []primaryMove{}}
	for _, m := range res.Moves {
		out.Moves = append(out.Moves, primaryMove{Topic: m.Topic, Partition: m.Partition, FromNodeID: m.FromNode, ToNodeID: m.ToNode})
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *API) movePrimary(w http.ResponseWriter, r *http.Request) {
	name, err := pathTopic(r)
	var p int32
	if err == nil {
		p, err = pathPartition(r.PathValue("partition"))
	}
	if err != nil {
		h.fail(w, err)
		return
	}
	// readJSON checks the query: after the path, as on every route.
	var in movePrimaryBody
	body, ok := h.readJSON(w, r, &in)
	if !ok {
		return
	}
	if in.NodeID < 1 || in.NodeID > wire.NodesMax {
		h.fail(w, wire.Errorf(wire.ErrInvalidRequest, "body field \"node_id\" is %d; give the id (1..%d) of an in-sync replica", in.NodeID, wire.NodesMax))
		return
	}
	if !h.onMetadataPrimary(w, r, body) {
		return
	}
	res, err := await(func(done func(service.MovePrimaryResult, error)) {
		h.svcOf(r).MovePrimary(nil, &service.MovePrimaryRequest{Topic: name, Partition: p, TargetNodeID: int32(in.NodeID),
			Timeout: movePrimaryTimeout}, done)
	})
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, movePrimaryAnswer{Topic: name, Partition: p, PrimaryID: res.PrimaryID, Generation: res.Generation})
}

// ownStats is this node's figures now.
func (h *API) ownStats() statsAnswer {
	var s Stats
	if h.stats != nil {
		s = h.stats()
	}
	return statsAnswer{NodeID: h.self, TimeMs: time.Now().UnixMilli(), ProduceRequests: s.ProduceRequests,
		ProducedBytes: s.ProducedBytes, ProduceErrors: s.ProduceErrors, FetchRequests: s.FetchRequests,
		FetchedBytes: s.FetchedBytes, FetchErrors: s.FetchErrors}
}

func (h *API) nodeStats(w http.ResponseWriter, r *http.Request) {
	if err := checkQuery(r.URL.Query()); err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, h.ownStats())
}

// clusterStats gathers every node's GET /v1/stats at once, each within
// statsGatherTimeout; this node answers its own.
func (h *API) clusterStats(w http.ResponseWriter, r *http.Request) {
	if err := checkQuery(r.URL.Query()); err != nil {
		h.fail(w, err)
		return
	}
	nodes := gather(h, r.Context(), "/v1/stats", "figures", h.ownStats, func(id int32, msg string) statsAnswer {
		return statsAnswer{NodeID: id, Error: &msg}
	})
	writeJSON(w, http.StatusOK, clusterStatsAnswer{Nodes: nodes})
}
