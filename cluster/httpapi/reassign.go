package httpapi

import (
	"net/http"

	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/wire"
)

// The replica-move routes (docs/http.md): list the moves in progress and
// the nodes draining, drain or replace a node, undrain it. They run on the
// metadata primary (forwarded there in one hop) and are cluster
// operations, as the native Reassign API.

func (h *API) registerReassign() {
	h.mux.HandleFunc("GET /v1/reassignments", h.listReassignments)
	h.mux.HandleFunc("POST /v1/nodes/{node}/drain", h.drainNode)
	h.mux.HandleFunc("DELETE /v1/nodes/{node}/drain", h.undrainNode)
}

// drainBody is POST /v1/nodes/{node}/drain's body: replace_with names the
// node that takes the drained node's place (a replace; 0: a drain).
type drainBody struct {
	DryRun      bool  `json:"dry_run"`
	ReplaceWith int32 `json:"replace_with"`
}

// moveAnswer is one move in progress.
type moveAnswer struct {
	Topic         string   `json:"topic"`
	Partition     int32    `json:"partition"`
	From          []int32  `json:"from"`
	Target        []int32  `json:"target"`
	Cancelled     bool     `json:"cancelled"`
	Driven        bool     `json:"driven"`
	EntriesBehind int64    `json:"entries_behind"`
	BytesBehind   int64    `json:"bytes_behind"`
	BytesMoved    int64    `json:"bytes_moved"`
	EtaMs         int64    `json:"eta_ms"`
	Steps         []string `json:"steps"`
}

// drainAnswer is one node draining.
type drainAnswer struct {
	NodeID      int32 `json:"node_id"`
	ReplaceWith int32 `json:"replace_with"`
	Replicas    int32 `json:"replicas"`
	Primaries   int32 `json:"primaries"`
	Moving      int32 `json:"moving"`
	Done        bool  `json:"done"`
}

// reassignAnswer answers every route here.
type reassignAnswer struct {
	Moves  []moveAnswer  `json:"moves"`
	Drains []drainAnswer `json:"drains"`
}

func (reassignAnswer) httpAnswer() {}
func (drainBody) httpAnswer()      {}

func reassignAnswerOf(res service.ReassignResult) reassignAnswer {
	out := reassignAnswer{Moves: []moveAnswer{}, Drains: []drainAnswer{}}
	for _, m := range res.Moves {
		steps := m.Steps
		if steps == nil {
			steps = []string{}
		}
		out.Moves = append(out.Moves, moveAnswer{Topic: m.Topic, Partition: m.Partition, From: m.From, Target: m.Target, Cancelled: m.Cancelled,
			Driven: m.Driven, EntriesBehind: m.EntriesBehind, BytesBehind: m.BytesBehind, BytesMoved: m.BytesMoved, EtaMs: m.EtaMs, Steps: steps})
	}
	for _, d := range res.Drains {
		out.Drains = append(out.Drains, drainAnswer{NodeID: d.Node, ReplaceWith: d.Replacement, Replicas: d.Replicas, Primaries: d.Primaries,
			Moving: d.Moving, Done: d.Done})
	}
	return out
}

// reassign runs req on the metadata primary and answers its result.
func (h *API) reassign(w http.ResponseWriter, r *http.Request, body []byte, req *service.ReassignRequest) {
	if !h.onMetadataPrimary(w, r, body) {
		return
	}
	res, err := await(func(done func(service.ReassignResult, error)) { h.svcOf(r).Reassign(nil, req, done) })
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, reassignAnswerOf(res))
}

func (h *API) listReassignments(w http.ResponseWriter, r *http.Request) {
	if err := checkQuery(r.URL.Query()); err != nil {
		h.fail(w, err)
		return
	}
	h.reassign(w, r, nil, &service.ReassignRequest{Action: service.ReassignList})
}

// pathNode reads {node}.
func pathNode(r *http.Request) (int32, error) {
	id, err := parseDecimal(r.PathValue("node"), 1, wire.NodesMax)
	if err != nil {
		return 0, wire.Errorf(wire.ErrInvalidRequest, "node in the path: %v", err)
	}
	return int32(id), nil
}

func (h *API) drainNode(w http.ResponseWriter, r *http.Request) {
	id, err := pathNode(r)
	if err != nil {
		h.fail(w, err)
		return
	}
	var in drainBody
	body, ok := h.readJSON(w, r, &in)
	if !ok {
		return
	}
	req := &service.ReassignRequest{Action: service.ReassignDrain, Node: id, DryRun: in.DryRun}
	if in.ReplaceWith != 0 {
		req.Action, req.Replacement = service.ReassignReplace, in.ReplaceWith
	}
	h.reassign(w, r, body, req)
}

func (h *API) undrainNode(w http.ResponseWriter, r *http.Request) {
	id, err := pathNode(r)
	if err == nil {
		err = checkQuery(r.URL.Query())
	}
	if err != nil {
		h.fail(w, err)
		return
	}
	h.reassign(w, r, nil, &service.ReassignRequest{Action: service.ReassignUndrain, Node: id})
}
