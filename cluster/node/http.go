package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/corestream/corestream/cluster/forward"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/segment/batch"
	"golang.org/x/sys/unix"
)

// The HTTP API (docs/http.md). Every node serves it. A request about a
// partition runs on the partition's primary and a request that changes
// metadata on the metadata primary: a node that is not the right one
// forwards the request there in one hop, signed with a proof
// (cluster/forward) that expires after 10 s; a forwarded request is never
// forwarded again. Requests run on the owning shard through the same code
// as the binary protocol.

// Bounds of the HTTP API.
const (
	httpBodyBytesMax   = 16 << 20
	httpRecordsMax     = 10000
	httpForwardTimeout = 30 * time.Second
)

type httpAPI struct {
	n      *Node
	srv    *http.Server
	ln     net.Listener
	client *http.Client
}

func (n *Node) startHTTP() error {
	if n.cfg.Node.HTTPAddr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", n.cfg.Node.HTTPAddr)
	if err != nil {
		return fmt.Errorf("node: node.http_addr %s: %w", n.cfg.Node.HTTPAddr, err)
	}
	h := &httpAPI{n: n, ln: ln, client: &http.Client{Timeout: httpForwardTimeout}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/health", h.health)
	mux.HandleFunc("GET /v1/cluster", h.cluster)
	mux.HandleFunc("GET /v1/topics", h.listTopics)
	mux.HandleFunc("POST /v1/topics", h.createTopic)
	mux.HandleFunc("GET /v1/topics/{topic}", h.describeTopic)
	mux.HandleFunc("DELETE /v1/topics/{topic}", h.deleteTopic)
	mux.HandleFunc("POST /v1/topics/{topic}/partitions/{partition}/records", h.produce)
	mux.HandleFunc("GET /v1/topics/{topic}/partitions/{partition}/records", h.fetch)
	mux.Handle("GET /metrics", n.metricsHandler())
	h.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	n.http = h
	go h.srv.Serve(ln)
	n.log.Info("http listening", "http_addr", ln.Addr().String())
	return nil
}

// HTTPAddr is the address the HTTP API bound ("" when disabled).
func (n *Node) HTTPAddr() string {
	if n.http == nil {
		return ""
	}
	return n.http.ln.Addr().String()
}

func (h *httpAPI) stop(ctx context.Context) error { return h.srv.Shutdown(ctx) }

// httpError is the JSON body of every error.
type httpError struct {
	Error   string `json:"error"`
	Message string `json:"message"`
	// Primary and Address name where to send the request when this node
	// could not forward it.
	Primary int32  `json:"primary,omitempty"`
	Address string `json:"address,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// fail writes err with the status its wire code maps to.
func fail(w http.ResponseWriter, err error) {
	var er *wire.ErrorResponse
	status, body := http.StatusInternalServerError, httpError{Error: "UNKNOWN_SERVER_ERROR", Message: err.Error()}
	if errors.As(err, &er) {
		body = httpError{Error: er.Err.Name, Message: er.Message}
		if er.Hint != nil {
			body.Primary, body.Address = er.Hint.NodeID, er.Hint.Address
		}
		switch er.Err {
		case wire.ErrUnknownTopicOrPartition:
			status = http.StatusNotFound
		case wire.ErrTopicAlreadyExists:
			status = http.StatusConflict
		case wire.ErrBusy:
			status = http.StatusTooManyRequests
		case wire.ErrNotPrimary, wire.ErrNotMetadataPrimary:
			status = http.StatusMisdirectedRequest
		case wire.ErrRequestTimedOut:
			status = http.StatusGatewayTimeout
		default:
			switch {
			case er.Err.Retriable:
				status = http.StatusServiceUnavailable
			case er.Err.Code != wire.ErrUnknownServerError.Code:
				status = http.StatusBadRequest
			}
		}
	}
	writeJSON(w, status, body)
}

func (h *httpAPI) health(w http.ResponseWriter, r *http.Request) {
	lead, gen := h.n.metaRoute()
	writeJSON(w, http.StatusOK, map[string]any{"node": h.n.self, "status": "ok", "version": Version,
		"metadata_primary": lead, "metadata_generation": gen})
}

func (h *httpAPI) cluster(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, h.n.clusterStatus())
}

func (h *httpAPI) listTopics(w http.ResponseWriter, r *http.Request) {
	out := []map[string]any{}
	for _, t := range h.n.view.Load().Sorted {
		out = append(out, map[string]any{"name": t.Name, "id": t.ID.String(), "partitions": t.Partitions(),
			"replication_factor": t.ReplicationFactor})
	}
	writeJSON(w, http.StatusOK, map[string]any{"topics": out})
}

func (h *httpAPI) describeTopic(w http.ResponseWriter, r *http.Request) {
	t := h.n.view.Load().Topics[r.PathValue("topic")]
	if t == nil {
		fail(w, wire.Errorf(wire.ErrUnknownTopicOrPartition, "topic %q does not exist", r.PathValue("topic")))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": t.Name, "id": t.ID.String(),
		"replication_factor": t.ReplicationFactor, "partitions": h.n.topicMetadata(t).Partitions})
}

// readBody reads a bounded request body.
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, httpBodyBytesMax+1))
	if err != nil {
		return nil, wire.Errorf(wire.ErrInvalidRequest, "reading the body: %v", err)
	}
	if len(b) > httpBodyBytesMax {
		return nil, wire.Errorf(wire.ErrMessageTooLarge, "request body over %d bytes", httpBodyBytesMax)
	}
	return b, nil
}

// route decides where r runs: here (true), or it has been forwarded (or
// refused) and answered (false). target is the node that must serve it.
func (h *httpAPI) route(w http.ResponseWriter, r *http.Request, body []byte, target int32) bool {
	n := h.n
	proof := r.Header.Get(forward.Header)
	if proof != "" {
		from, err := forward.Verify([]byte(n.cfg.HTTP.JWTSecret), proof,
			forward.Request{Method: r.Method, PathQuery: r.URL.RequestURI(), Body: body, To: int32(n.self)}, time.Now())
		if err != nil {
			writeJSON(w, http.StatusUnauthorized, httpError{Error: "INVALID_FORWARDING_PROOF", Message: err.Error()})
			return false
		}
		if target != int32(n.self) {
			writeJSON(w, http.StatusMisdirectedRequest, httpError{Error: "NOT_PRIMARY",
				Message: fmt.Sprintf("forwarded by node %d, but node %d is not the primary (node %d is); a forwarded request is not forwarded again", from, n.self, target),
				Primary: target, Address: n.httpAddrOf(target)})
			return false
		}
		return true
	}
	if target == int32(n.self) {
		return true
	}
	addr := n.httpAddrOf(target)
	if target <= 0 || addr == "" || n.cfg.HTTP.JWTSecret == "" {
		msg := fmt.Sprintf("node %d is not the primary; node %d is", n.self, target)
		if target <= 0 {
			msg = "no primary is known right now"
		} else if n.cfg.HTTP.JWTSecret == "" {
			msg += " (forwarding needs http.jwt_secret)"
		}
		writeJSON(w, http.StatusMisdirectedRequest, httpError{Error: "NOT_PRIMARY", Message: msg, Primary: target, Address: addr})
		return false
	}
	h.forward(w, r, body, target, addr)
	return false
}

// forward sends r to node target once, with a signed proof, and copies
// the answer back.
func (h *httpAPI) forward(w http.ResponseWriter, r *http.Request, body []byte, target int32, addr string) {
	n := h.n
	proof, err := forward.Sign([]byte(n.cfg.HTTP.JWTSecret),
		forward.Request{Method: r.Method, PathQuery: r.URL.RequestURI(), Body: body, From: int32(n.self), To: target}, time.Now())
	if err != nil {
		fail(w, err)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+addr+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		fail(w, err)
		return
	}
	req.Header.Set(forward.Header, proof)
	if ct := r.Header.Get("Content-Type"); ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		writeJSON(w, http.StatusBadGateway, httpError{Error: "NODE_NOT_AVAILABLE",
			Message: fmt.Sprintf("forwarding to node %d at %s: %v", target, addr, err), Primary: target, Address: addr})
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set("X-Corestream-Served-By", strconv.Itoa(int(target)))
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

func (n *Node) httpAddrOf(id int32) string {
	for _, m := range n.roster {
		if int32(m.ID) == id {
			return m.HTTPAddr
		}
	}
	return ""
}

// adminCall runs an admin request on the controller and waits.
func (n *Node) adminCall(req wire.Request) (any, error) {
	out := make(chan any, 1)
	err := n.group.Shard(metaShard).Post(func() { n.ctrl.serve(req, func(v any) { out <- v }) })
	if err != nil {
		return nil, busy(err)
	}
	v := <-out
	if err, ok := v.(error); ok {
		return nil, n.withAddress(err)
	}
	return v, nil
}

func (h *httpAPI) createTopic(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		fail(w, err)
		return
	}
	lead, _ := h.n.metaRoute()
	if !h.route(w, r, body, lead) {
		return
	}
	var spec struct {
		Name              string            `json:"name"`
		Partitions        int32             `json:"partitions"`
		ReplicationFactor int16             `json:"replication_factor"`
		Config            map[string]string `json:"config"`
	}
	if err := json.Unmarshal(body, &spec); err != nil {
		fail(w, wire.Errorf(wire.ErrInvalidRequest, "body: %v", err))
		return
	}
	req := &wire.CreateTopicRequest{Name: spec.Name, Partitions: spec.Partitions, ReplicationFactor: spec.ReplicationFactor}
	for k, v := range spec.Config {
		req.Configs = append(req.Configs, wire.Config{Key: k, Value: v})
	}
	v, err := h.n.adminCall(req)
	if err != nil {
		fail(w, err)
		return
	}
	resp := v.(*wire.CreateTopicResponse)
	writeJSON(w, http.StatusCreated, map[string]any{"name": spec.Name, "id": metadata.TopicID(resp.TopicID).String(),
		"partitions": resp.Partitions, "replication_factor": resp.ReplicationFactor})
}

func (h *httpAPI) deleteTopic(w http.ResponseWriter, r *http.Request) {
	lead, _ := h.n.metaRoute()
	if !h.route(w, r, nil, lead) {
		return
	}
	v, err := h.n.adminCall(&wire.DeleteTopicRequest{Name: r.PathValue("topic")})
	if err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": r.PathValue("topic"), "id": metadata.TopicID(v.(*wire.DeleteTopicResponse).TopicID).String()})
}

// partitionTarget resolves a partition path to its topic and primary.
func (h *httpAPI) partitionTarget(r *http.Request) (*metadata.Topic, int32, int32, error) {
	name := r.PathValue("topic")
	p64, err := strconv.ParseInt(r.PathValue("partition"), 10, 32)
	t := h.n.view.Load().Topics[name]
	if err != nil || t == nil || p64 < 0 || int(p64) >= t.Partitions() {
		return nil, 0, 0, unknownPartition(name, int32(p64), t)
	}
	rt, ok := h.n.routes.get(shardKey(t.ID, int32(p64)))
	lead := int32(-1)
	if ok && rt.leader > 0 {
		lead = rt.leader
	}
	return t, int32(p64), lead, nil
}

// httpRecord is one record in the JSON bodies. Values are strings; a
// client with binary data sends value_base64 (encoding/json's []byte).
type httpRecord struct {
	Offset    int64             `json:"offset,omitempty"`
	Timestamp int64             `json:"timestamp,omitempty"`
	Key       *string           `json:"key,omitempty"`
	Value     *string           `json:"value,omitempty"`
	ValueB64  []byte            `json:"value_base64,omitempty"`
	Headers   map[string]string `json:"headers,omitempty"`
}

// serveLocal runs a data request on the owning shard and returns the
// response frame (and its file ranges, to read before release).
func (n *Node) serveLocal(t *metadata.Topic, p int32, key wire.APIKey, req wire.Request) (netio.Response, error) {
	v, _, _ := key.Versions()
	hdr := wire.RequestHeader{APIKey: key, APIVersion: v}
	body := req.AppendBody(nil, v)
	out := make(chan netio.Response, 1)
	sh := n.group.Shard(n.shardOf(t.ID, p))
	if err := sh.Post(func() { n.serveData(sh, t, p, hdr, body, func(r netio.Response) { out <- r }) }); err != nil {
		return netio.Response{}, busy(err)
	}
	return <-out, nil
}

func (h *httpAPI) produce(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	if err != nil {
		fail(w, err)
		return
	}
	t, p, lead, err := h.partitionTarget(r)
	if err != nil {
		fail(w, err)
		return
	}
	if !h.route(w, r, body, lead) {
		return
	}
	var in struct {
		Records []httpRecord `json:"records"`
	}
	if err := json.Unmarshal(body, &in); err != nil || len(in.Records) == 0 || len(in.Records) > httpRecordsMax {
		fail(w, wire.Errorf(wire.ErrInvalidRequest, "body must be {\"records\": [...]} with 1..%d records (%v)", httpRecordsMax, err))
		return
	}
	b, _ := batch.NewBuilder(batch.Options{})
	now := time.Now().UnixMilli()
	for _, rec := range in.Records {
		br := batch.Record{Timestamp: now}
		if rec.Key != nil {
			br.Key = []byte(*rec.Key)
		}
		switch {
		case rec.ValueB64 != nil:
			br.Value = rec.ValueB64
		case rec.Value != nil:
			br.Value = []byte(*rec.Value)
		}
		for k, v := range rec.Headers {
			br.Headers = append(br.Headers, batch.RecordHeader{Key: []byte(k), Value: []byte(v)})
		}
		if err := b.Append(br); err != nil {
			fail(w, wire.Errorf(wire.ErrMessageTooLarge, "%v", err))
			return
		}
	}
	data, err := b.Build()
	if err != nil {
		fail(w, wire.Errorf(wire.ErrInvalidRequest, "%v", err))
		return
	}
	req := &wire.ProduceRequest{PartitionRef: wire.PartitionRef{Topic: t.Name, TopicID: wire.TopicID(t.ID), Partition: p, Generation: wire.GenerationUnknown},
		Acks: wire.AcksQuorum, Records: data}
	if r.URL.Query().Get("acks") == "primary" {
		req.Acks = wire.AcksPrimary
	}
	resp, err := h.n.serveLocal(t, p, wire.APIProduce, req)
	if err != nil {
		fail(w, err)
		return
	}
	var pr wire.ProduceResponse
	if err := decodeFrame(resp.Header, &pr); err != nil {
		fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"base_offset": pr.BaseOffset, "records": len(in.Records), "served_by": h.n.self})
}

func decodeFrame(frame []byte, resp wire.Response) error {
	f, _, err := wire.NextResponseFrame(frame, len(frame))
	if err != nil {
		return err
	}
	rh, body, err := wire.ParseResponseHeader(f)
	if err != nil {
		return err
	}
	v, _, _ := resp.APIKey().Versions()
	return wire.DecodeResponseBody(rh, body, v, resp)
}

func (h *httpAPI) fetch(w http.ResponseWriter, r *http.Request) {
	t, p, lead, err := h.partitionTarget(r)
	if err != nil {
		fail(w, err)
		return
	}
	if !h.route(w, r, nil, lead) {
		return
	}
	q := r.URL.Query()
	num := func(k string, def int64) int64 {
		if v, err := strconv.ParseInt(q.Get(k), 10, 64); err == nil {
			return v
		}
		return def
	}
	req := &wire.FetchRequest{PartitionRef: wire.PartitionRef{Topic: t.Name, TopicID: wire.TopicID(t.ID), Partition: p, Generation: wire.GenerationUnknown},
		FetchOffset: num("offset", 0), MaxBytes: uint32(min(num("max_bytes", 1<<20), wire.RecordsBytesMax)),
		MinBytes: 1, MaxWaitMs: uint32(min(num("max_wait_ms", 0), wire.FetchWaitMsMax))}
	resp, err := h.n.serveLocal(t, p, wire.APIFetch, req)
	if err != nil {
		fail(w, err)
		return
	}
	frame := resp.Header
	for _, f := range resp.Files {
		buf := make([]byte, f.Len)
		if _, err := unix.Pread(f.Fd, buf, f.Off); err != nil {
			if resp.Release != nil {
				resp.Release(err)
			}
			fail(w, wire.Errorf(wire.ErrStorageError, "reading a segment: %v", err))
			return
		}
		frame = append(frame, buf...)
	}
	if resp.Release != nil {
		resp.Release(nil)
	}
	var fr wire.FetchResponse
	if err := decodeFrame(frame, &fr); err != nil {
		fail(w, err)
		return
	}
	out := []httpRecord{}
	batches, _, _ := batch.Split(nil, fr.Records)
	var it batch.Records
	for _, b := range batches {
		if err := it.Reset(b); err != nil {
			continue
		}
		if h := it.Header(); h.IsControl() {
			continue
		}
		for it.Next() {
			rec := it.Record()
			if rec.Offset < req.FetchOffset {
				continue
			}
			hr := httpRecord{Offset: rec.Offset, Timestamp: rec.Timestamp}
			if rec.Key != nil {
				k := string(rec.Key)
				hr.Key = &k
			}
			if rec.Value != nil {
				v := string(rec.Value)
				hr.Value = &v
			}
			for _, hd := range rec.Headers {
				if hr.Headers == nil {
					hr.Headers = map[string]string{}
				}
				hr.Headers[string(hd.Key)] = string(hd.Value)
			}
			out = append(out, hr)
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"high_watermark": fr.HighWatermark, "log_start_offset": fr.LogStartOffset,
		"records": out, "served_by": h.n.self})
}
