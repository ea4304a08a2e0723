package httpapi

import (
	"net/http"

	"github.com/corestream/corestream/cluster/history"
)

// The figures' history the console's charts are drawn from: each node
// keeps a bounded ring of samples (cluster/history), taken on its own
// clock every few seconds; GET /v1/history answers this node's, GET
// /v1/cluster/history gathers every node's at once, as GET
// /v1/cluster/stats gathers their figures of the moment.

// HistorySource is a node's history of figures (Config.History).
type HistorySource interface {
	// History is the node's samples, oldest first, and the time between
	// two of them in ms.
	History() (samples []history.Sample, intervalMs int64)
}

// historyAnswer answers GET /v1/history: one node's samples.
type historyAnswer struct {
	NodeID     int32            `json:"node_id"`
	IntervalMs int64            `json:"interval_ms"`
	Samples    []history.Sample `json:"samples"`
	Error      *string          `json:"error"`
}

// clusterHistoryAnswer answers GET /v1/cluster/history: every node's
// samples, as each answered (error set, no samples, where it did not).
type clusterHistoryAnswer struct {
	Nodes []historyAnswer `json:"nodes"`
}

func (historyAnswer) httpAnswer()        {}
func (clusterHistoryAnswer) httpAnswer() {}

// ownHistory is this node's samples.
func (h *API) ownHistory() historyAnswer {
	a := historyAnswer{NodeID: h.self, Samples: []history.Sample{}}
	if h.history != nil {
		s, every := h.history.History()
		a.IntervalMs = every
		if s != nil {
			a.Samples = s
		}
	}
	for i := range a.Samples {
		if a.Samples[i].Groups == nil {
			a.Samples[i].Groups = []history.GroupLag{}
		}
	}
	return a
}

func (h *API) nodeHistory(w http.ResponseWriter, r *http.Request) {
	if err := checkQuery(r.URL.Query()); err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, h.ownHistory())
}

// clusterHistory gathers every node's GET /v1/history at once, each
// within statsGatherTimeout; this node answers its own.
func (h *API) clusterHistory(w http.ResponseWriter, r *http.Request) {
	if err := checkQuery(r.URL.Query()); err != nil {
		h.fail(w, err)
		return
	}
	nodes := gather(h, r.Context(), "/v1/history", "history", h.ownHistory, func(id int32, msg string) historyAnswer {
		return historyAnswer{NodeID: id, Samples: []history.Sample{}, Error: &msg}
	})
	writeJSON(w, http.StatusOK, clusterHistoryAnswer{Nodes: nodes})
}
