package httpapi

import (
	"bytes"
	"encoding/json"
	"github.com/corestream/corestream/cluster/service/wirecode"
	"maps"
	"net/http"
	"slices"
	"strconv"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/wire"
)

// The HTTP API's node, cluster and topic endpoints. Every answer is a
// named type with snake_case json tags (TestHTTPAnswersAreSnakeCase); node
// ids are *_id fields, -1 where none is known.

// healthAnswer answers GET /v1/health.
type healthAnswer struct {
	NodeID             int32  `json:"node_id"`
	Status             string `json:"status"`
	Version            string `json:"version"`
	MetadataPrimaryID  int32  `json:"metadata_primary_id"`
	MetadataGeneration int32  `json:"metadata_generation"`
}

// clusterAnswer answers GET /v1/cluster (wire.ClusterStatusResponse).
type clusterAnswer struct {
	MetadataPrimaryID   int32         `json:"metadata_primary_id"`
	MetadataGeneration  int32         `json:"metadata_generation"`
	RebalanceInProgress bool          `json:"rebalance_in_progress"`
	Partitions          int32         `json:"partitions"`
	UnderReplicated     int32         `json:"under_replicated"`
	Offline             int32         `json:"offline"`
	Nodes               []nodeSummary `json:"nodes"`
}

// nodeSummary is one node of the roster with its share of partitions.
type nodeSummary struct {
	NodeID             int32  `json:"node_id"`
	ClientAddr         string `json:"client_addr"`
	HTTPAddr           string `json:"http_addr"`
	Alive              bool   `json:"alive"`
	Primaries          int32  `json:"primaries"`
	Replicas           int32  `json:"replicas"`
	PreferredPrimaries int32  `json:"preferred_primaries"`
}

// topicList answers GET /v1/topics.
type topicList struct {
	Topics []topicSummary `json:"topics"`
}

// topicSummary is a topic without its routes; it also answers a create.
type topicSummary struct {
	Name              string `json:"name"`
	ID                string `json:"id"`
	Partitions        int32  `json:"partitions"`
	ReplicationFactor int16  `json:"replication_factor"`
}

// topicDetail answers GET /v1/topics/{topic}: the topic with every
// partition's route.
type topicDetail struct {
	Name              string           `json:"name"`
	ID                string           `json:"id"`
	ReplicationFactor int16            `json:"replication_factor"`
	Partitions        []partitionRoute `json:"partitions"`
}

// partitionRoute is one partition's route (wire.PartitionRoute). Error
// is the wire error name when the partition has no usable primary
// (PRIMARY_NOT_AVAILABLE, NOT_ENOUGH_REPLICAS), null otherwise.
type partitionRoute struct {
	Partition          int32   `json:"partition"`
	PrimaryID          int32   `json:"primary_id"`
	Generation         int32   `json:"generation"`
	PreferredPrimaryID int32   `json:"preferred_primary_id"`
	Replicas           []int32 `json:"replicas"`
	InSync             []int32 `json:"in_sync"`
	Offline            []int32 `json:"offline"`
	Error              *string `json:"error"`
}

// deletedTopic answers DELETE /v1/topics/{topic}.
type deletedTopic struct {
	Name string `json:"name"`
	ID   string `json:"id"`
}

func (healthAnswer) httpAnswer()  {}
func (clusterAnswer) httpAnswer() {}
func (topicList) httpAnswer()     {}
func (topicSummary) httpAnswer()  {}
func (topicDetail) httpAnswer()   {}
func (deletedTopic) httpAnswer()  {}

// createTopicBody is the body of POST /v1/topics. Numbers are read as
// int64 so that an out-of-range one gets its own code, not a type error.
type createTopicBody struct {
	Name       string `json:"name"`
	Partitions *int64 `json:"partitions"`
	// ReplicationFactor absent or 0 is the cluster's default.
	ReplicationFactor int64 `json:"replication_factor"`
	// Config values are strings or integers: {"retention_ms": 60000}.
	Config map[string]json.RawMessage `json:"config"`
}

// createTopicRequest checks a create body and turns it into the service's
// request, with the codes the controller would answer.
func createTopicRequest(body []byte) (*service.CreateTopicRequest, error) {
	var in createTopicBody
	if err := decodeBody(body, &in); err != nil {
		return nil, err
	}
	if in.Partitions == nil {
		return nil, wire.Errorf(wire.ErrInvalidPartitions, "body field \"partitions\" is missing; give 1..%d", wire.PartitionsPerTopicMax)
	}
	if p := *in.Partitions; p < 1 || p > wire.PartitionsPerTopicMax {
		return nil, wire.Errorf(wire.ErrInvalidPartitions, "body field \"partitions\" is %d; give 1..%d", p, wire.PartitionsPerTopicMax)
	}
	if rf := in.ReplicationFactor; rf < 0 || rf > wire.ReplicationFactorMax {
		return nil, wire.Errorf(wire.ErrInvalidReplicationFactor, "body field \"replication_factor\" is %d; give 0 (the cluster default) or 1..%d", rf, wire.ReplicationFactorMax)
	}
	if len(in.Config) > wire.ConfigsMax {
		return nil, wire.Errorf(wire.ErrInvalidConfig, "body field \"config\" has %d entries; at most %d", len(in.Config), wire.ConfigsMax)
	}
	req := &wire.CreateTopicRequest{Name: in.Name, Partitions: int32(*in.Partitions), ReplicationFactor: int16(in.ReplicationFactor)}
	for _, k := range slices.Sorted(maps.Keys(in.Config)) {
		v, err := configValue(k, in.Config[k])
		if err != nil {
			return nil, err
		}
		req.Configs = append(req.Configs, wire.Config{Key: k, Value: v})
	}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	out := &service.CreateTopicRequest{Name: req.Name, Partitions: req.Partitions, ReplicationFactor: req.ReplicationFactor}
	for _, c := range req.Configs {
		out.Configs = append(out.Configs, service.Config{Key: c.Key, Value: c.Value})
	}
	return out, nil
}

// configValue is a config value given as a JSON string or integer, as
// the string the wire carries.
func configValue(key string, raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	if _, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64); err == nil {
		return string(bytes.TrimSpace(raw)), nil
	}
	return "", wire.Errorf(wire.ErrInvalidConfig, "body field \"config.%s\" is %s; give an integer or a string", key, raw)
}

func (h *API) health(w http.ResponseWriter, r *http.Request) {
	if err := checkQuery(r.URL.Query()); err != nil {
		h.fail(w, err)
		return
	}
	id := h.svcOf(r).Identity()
	lead, gen := h.svcOf(r).MetadataRoute()
	writeJSON(w, http.StatusOK, healthAnswer{NodeID: id.NodeID, Status: "ok", Version: id.Version,
		MetadataPrimaryID: lead, MetadataGeneration: gen})
}

func (h *API) cluster(w http.ResponseWriter, r *http.Request) {
	if err := checkQuery(r.URL.Query()); err != nil {
		h.fail(w, err)
		return
	}
	st, err := h.svcOf(r).ClusterStatus()
	if err != nil {
		h.fail(w, err)
		return
	}
	out := clusterAnswer{MetadataPrimaryID: st.MetadataPrimaryID, MetadataGeneration: st.MetadataGeneration,
		RebalanceInProgress: st.RebalanceInProgress, Partitions: st.Partitions, UnderReplicated: st.UnderReplicated,
		Offline: st.Offline, Nodes: make([]nodeSummary, 0, len(st.Nodes))}
	for _, n := range st.Nodes {
		out.Nodes = append(out.Nodes, nodeSummary{NodeID: n.ID, ClientAddr: n.ClientAddr, HTTPAddr: n.HTTPAddr, Alive: n.Alive,
			Primaries: n.Primaries, Replicas: n.Replicas, PreferredPrimaries: n.PreferredPrimaries})
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *API) listTopics(w http.ResponseWriter, r *http.Request) {
	if err := checkQuery(r.URL.Query()); err != nil {
		h.fail(w, err)
		return
	}
	// Before the committed metadata is loaded the list could leave topics
	// out: 503 METADATA_NOT_READY, as on the native port.
	topics, err := h.svcOf(r).ListTopics()
	if err != nil {
		h.fail(w, err)
		return
	}
	out := topicList{Topics: []topicSummary{}}
	for _, t := range topics {
		out.Topics = append(out.Topics, topicSummary{Name: t.Name, ID: t.ID.String(), Partitions: t.Partitions,
			ReplicationFactor: t.ReplicationFactor})
	}
	writeJSON(w, http.StatusOK, out)
}

// pathTopic is the {topic} of the path, checked against the naming rule
// (INVALID_TOPIC_NAME, 400) so that a typo is not answered as "unknown".
func pathTopic(r *http.Request) (string, error) {
	name := r.PathValue("topic")
	if err := wire.ValidateTopicName(name); err != nil {
		return "", err
	}
	return name, nil
}

func (h *API) describeTopic(w http.ResponseWriter, r *http.Request) {
	name, err := pathTopic(r)
	if err == nil {
		err = checkQuery(r.URL.Query())
	}
	if err != nil {
		h.fail(w, err)
		return
	}
	d, err := h.svcOf(r).DescribeTopic(name)
	if err != nil {
		h.fail(w, err)
		return
	}
	tm := d.Topic
	out := topicDetail{Name: tm.Name, ID: tm.ID.String(), ReplicationFactor: tm.ReplicationFactor,
		Partitions: make([]partitionRoute, 0, len(tm.Partitions))}
	for _, p := range tm.Partitions {
		pr := partitionRoute{Partition: p.Partition, PrimaryID: p.PrimaryID, Generation: p.Generation,
			PreferredPrimaryID: p.PreferredPrimaryID, Replicas: nonNil(p.Replicas), InSync: nonNil(p.InSync),
			Offline: nonNil(p.Offline)}
		if p.Err != nil {
			// The error's name is the wire table's, as on every answer.
			name := wirecode.CodeOf(p.Err).Name
			pr.Error = &name
		}
		out.Partitions = append(out.Partitions, pr)
	}
	writeJSON(w, http.StatusOK, out)
}

// nonNil makes a nil list an empty one, so that JSON says [] not null.
func nonNil(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}

func (h *API) createTopic(w http.ResponseWriter, r *http.Request) {
	body, err := h.requestBody(w, r)
	if err != nil {
		h.fail(w, err)
		return
	}
	// Checked here so a bad body is refused without a hop; the metadata
	// primary checks it again.
	req, err := createTopicRequest(body)
	if err != nil {
		h.fail(w, err)
		return
	}
	if !h.onMetadataPrimary(w, r, body) {
		return
	}
	res, err := await(func(done func(service.CreateTopicResult, error)) { h.svcOf(r).CreateTopic(nil, req, done) })
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, topicSummary{Name: req.Name, ID: res.ID.String(),
		Partitions: res.Partitions, ReplicationFactor: res.ReplicationFactor})
}

func (h *API) deleteTopic(w http.ResponseWriter, r *http.Request) {
	name, err := pathTopic(r)
	if err == nil {
		err = checkQuery(r.URL.Query())
	}
	if err != nil {
		h.fail(w, err)
		return
	}
	if !h.onMetadataPrimary(w, r, nil) {
		return
	}
	id, err := await(func(done func(metadata.TopicID, error)) {
		h.svcOf(r).DeleteTopic(nil, &service.DeleteTopicRequest{Name: name}, done)
	})
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, deletedTopic{Name: name, ID: id.String()})
}
