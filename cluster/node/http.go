package node

import (
	"net"

	"github.com/corestream/corestream/cluster/httpapi"
)

// startHTTP serves the HTTP API (cluster/httpapi) on ln, bound by
// preflight, in front of the node's service.
func (n *Node) startHTTP(ln net.Listener) {
	cfg := n.httpConfig()
	cfg.History = n.startHistory()
	h := httpapi.New(cfg, ln)
	n.http = h
	h.Serve()
	n.log.Info("http listening", "http_addr", h.Addr())
}

// httpConfig wires the HTTP API to this node.
func (n *Node) httpConfig() httpapi.Config {
	return httpapi.Config{Service: n.svc, Self: int32(n.self), JWTSecret: n.cfg.HTTP.JWTSecret,
		HTTPAddrOf: n.httpAddrOf, Metrics: n.metricsHandler(), Stats: n.svc.Meter().Stats, Users: n.svc, Groups: n.groups, Auth: n.httpAuth(),
		TLS: n.serverTLS(), ClientTLS: n.clientTLS}
}

// HTTPAddr is the address the HTTP API bound ("" when disabled).
func (n *Node) HTTPAddr() string {
	if n.http == nil {
		return ""
	}
	return n.http.Addr()
}

// httpAddrOf is node id's advertised HTTP address ("" when the roster
// has none).
func (n *Node) httpAddrOf(id int32) string {
	for _, m := range n.roster.nodes() {
		if int32(m.ID) == id {
			return m.HTTPAddr
		}
	}
	return ""
}
