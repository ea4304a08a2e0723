package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/corestream/corestream/cluster/service"
)

// nodeAnswer is an answer one node gives about itself (GET /v1/stats,
// GET /v1/history), which a cluster-wide answer gathers from all.
type nodeAnswer interface{ nodeID() int32 }

func (a statsAnswer) nodeID() int32   { return a.NodeID }
func (a historyAnswer) nodeID() int32 { return a.NodeID }

// gather answers for every node of the roster at once, in roster order:
// this node's own, every other node's GET path each within
// statsGatherTimeout. failed is the answer for a node that could not give
// its own (what names what it lacks, for the message).
func gather[T nodeAnswer](h *API, ctx context.Context, path, what string, own func() T, failed func(id int32, msg string) T) []T {
	brokers := h.svc.Brokers()
	out := make([]T, len(brokers))
	var wg sync.WaitGroup
	for i, b := range brokers {
		if b.ID == h.self {
			out[i] = own()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = remote(h, ctx, b, path, what, failed)
		}()
	}
	wg.Wait()
	return out
}

// remote asks node b for its answer to GET path.
func remote[T nodeAnswer](h *API, ctx context.Context, b service.Broker, path, what string, failed func(id int32, msg string) T) T {
	if b.HTTPAddr == "" {
		return failed(b.ID, "no http_addr in the roster")
	}
	ctx, cancel := context.WithTimeout(ctx, statsGatherTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.schemeOf()+"://"+b.HTTPAddr+path, nil)
	if err != nil {
		return failed(b.ID, err.Error())
	}
	onBehalf(ctx, req)
	resp, err := h.client.Do(req)
	if err != nil {
		return failed(b.ID, err.Error())
	}
	defer resp.Body.Close()
	var a T
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || resp.StatusCode != http.StatusOK || a.nodeID() != b.ID {
		return failed(b.ID, "node "+b.HTTPAddr+" answered "+resp.Status+" without its "+what)
	}
	return a
}
