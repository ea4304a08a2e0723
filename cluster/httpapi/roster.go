package httpapi

import (
	"net/http"
	"strconv"

	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/wire"
)

// The roster routes (docs/design/membership.md): GET /v1/cluster/nodes
// lists the committed roster on any node; POST adds a node and DELETE
// /v1/cluster/nodes/{id} starts removing a drained one, on the metadata
// primary. They are the CLI's cluster add-node and remove-node.

// addNodeBody is the body of POST /v1/cluster/nodes.
type addNodeBody struct {
	NodeID          int32  `json:"node_id"`
	ClientAddr      string `json:"client_addr"`
	ReplicationAddr string `json:"replication_addr"`
	HTTPAddr        string `json:"http_addr"`
	KafkaAddr       string `json:"kafka_addr"`
	Rack            string `json:"rack"`
}

// rosterMember is one roster node in an answer.
type rosterMember struct {
	NodeID          int32  `json:"node_id"`
	ClientAddr      string `json:"client_addr"`
	ReplicationAddr string `json:"replication_addr"`
	HTTPAddr        string `json:"http_addr"`
	KafkaAddr       string `json:"kafka_addr"`
	Rack            string `json:"rack"`
	State           string `json:"state"`
}

// rosterAnswer answers every roster route: the roster after the change.
type rosterAnswer struct {
	Nodes []rosterMember `json:"nodes"`
}

func (rosterAnswer) httpAnswer() {}
func (addNodeBody) httpAnswer()  {}

func (h *API) listNodes(w http.ResponseWriter, r *http.Request) {
	if err := checkQuery(r.URL.Query()); err != nil {
		h.fail(w, err)
		return
	}
	h.changeRoster(w, r, &service.RosterRequest{Action: service.RosterList})
}

func (h *API) addNode(w http.ResponseWriter, r *http.Request) {
	var in addNodeBody
	body, ok := h.readJSON(w, r, &in)
	if !ok {
		return
	}
	if in.NodeID < 1 || in.NodeID > wire.RosterNodesMax || in.ClientAddr == "" || in.ReplicationAddr == "" {
		h.fail(w, wire.Errorf(wire.ErrInvalidRequest, "body needs \"node_id\" (1..%d), \"client_addr\" and \"replication_addr\"; got node_id %d", wire.RosterNodesMax, in.NodeID))
		return
	}
	if !h.onMetadataPrimary(w, r, body) {
		return
	}
	h.changeRoster(w, r, &service.RosterRequest{Action: service.RosterAdd, Member: service.RosterMember{ID: in.NodeID, ClientAddr: in.ClientAddr,
		ReplicationAddr: in.ReplicationAddr, HTTPAddr: in.HTTPAddr, KafkaAddr: in.KafkaAddr, Rack: in.Rack}})
}

func (h *API) removeNode(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 32)
	if err != nil || id < 1 || id > wire.RosterNodesMax {
		h.fail(w, wire.Errorf(wire.ErrInvalidRequest, "node id %q is not a number in 1..%d", r.PathValue("id"), wire.RosterNodesMax))
		return
	}
	if err := checkQuery(r.URL.Query()); err != nil {
		h.fail(w, err)
		return
	}
	if !h.onMetadataPrimary(w, r, nil) {
		return
	}
	h.changeRoster(w, r, &service.RosterRequest{Action: service.RosterRemove, Member: service.RosterMember{ID: int32(id)}})
}

func (h *API) changeRoster(w http.ResponseWriter, r *http.Request, req *service.RosterRequest) {
	res, err := await(func(done func(service.RosterResult, error)) { h.svcOf(r).ChangeRoster(nil, req, done) })
	if err != nil {
		h.fail(w, err)
		return
	}
	out := rosterAnswer{Nodes: make([]rosterMember, 0, len(res.Members))}
	for _, m := range res.Members {
		out.Nodes = append(out.Nodes, rosterMember{NodeID: m.ID, ClientAddr: m.ClientAddr, ReplicationAddr: m.ReplicationAddr,
			HTTPAddr: m.HTTPAddr, KafkaAddr: m.KafkaAddr, Rack: m.Rack, State: m.State})
	}
	writeJSON(w, http.StatusOK, out)
}
