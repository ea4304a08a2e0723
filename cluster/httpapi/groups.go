package httpapi

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/corestream/corestream/cluster/forward"
	"github.com/corestream/corestream/cluster/native"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/wire"
)

// Consumer groups and their lag (GET /v1/groups, GET /v1/groups/{group};
// docs/http.md). A group here is any name with committed offsets — a
// Kafka consumer group or a native named consumer, which share offsets
// by name — or a group the coordinator holds. The committed offsets come
// from the typed service (FetchOffsets, with the caller's permissions);
// the end of each partition is its high watermark, asked of every
// primary at once as the partition listing asks (fillLogs); lag is the
// end minus the committed offset. Membership lives on the coordinator,
// which is the metadata primary: both routes run there when one is known
// and this node can forward to it, else here without members.

// Bounds of the groups routes.
const (
	// groupsPageDefault and groupsPageMax bound one page of the listing.
	groupsPageDefault = 100
	groupsPageMax     = 1000
)

// GroupsSource is the node's side of the groups routes.
type GroupsSource interface {
	// GroupNames are the names with committed offsets and the groups
	// this node's coordinator holds, sorted; an error when the metadata
	// did not answer within ctx.
	GroupNames(ctx context.Context) ([]string, error)
	// GroupMembers is group's membership as this node's coordinator
	// holds it; false when this node does not coordinate groups (it is
	// not the metadata primary) or holds no such group.
	GroupMembers(group string) (GroupMembership, bool)
}

// GroupMembership is a group as its coordinator holds it.
type GroupMembership struct {
	// State is Kafka's name for it: Empty, PreparingRebalance,
	// CompletingRebalance, Stable, Dead.
	State        string
	ProtocolType string
	Protocol     string
	Generation   int32
	Members      []GroupMember
}

// GroupMember is one member of a group.
type GroupMember struct {
	MemberID   string `json:"member_id"`
	InstanceID string `json:"instance_id,omitempty"`
	ClientID   string `json:"client_id"`
	Host       string `json:"host"`
}

// groupList answers GET /v1/groups.
type groupList struct {
	Total  int32 `json:"total"`
	Offset int32 `json:"offset"`
	Limit  int32 `json:"limit"`
	// CoordinatorID is the node that answered membership (the metadata
	// primary), -1 when the answer has none.
	CoordinatorID int32          `json:"coordinator_id"`
	Groups        []groupSummary `json:"groups"`
}

// groupSummary is one group of the listing.
type groupSummary struct {
	Group string `json:"group"`
	// State and Members are null when the coordinator was not asked or
	// holds no such group (a named consumer, or a group without members
	// since the coordinator's election).
	State   *string `json:"state"`
	Members *int    `json:"members"`
	// Partitions counts those with committed offsets; Lag sums their
	// lags whose end is known, EndUnknown counts those whose primary did
	// not answer (none, down, or too slow).
	Partitions int     `json:"partitions"`
	Lag        int64   `json:"lag"`
	EndUnknown int     `json:"end_unknown"`
	Error      *string `json:"error"`
}

// groupDetail answers GET /v1/groups/{group}.
type groupDetail struct {
	Group         string  `json:"group"`
	CoordinatorID int32   `json:"coordinator_id"`
	State         *string `json:"state"`
	ProtocolType  string  `json:"protocol_type,omitempty"`
	Protocol      string  `json:"protocol,omitempty"`
	Generation    *int32  `json:"generation"`
	// Members is null when the coordinator was not reachable or holds no
	// such group.
	Members    []GroupMember    `json:"members"`
	Lag        int64            `json:"lag"`
	EndUnknown int              `json:"end_unknown"`
	Partitions []groupPartition `json:"partitions"`
}

// groupPartition is one partition's committed offset, end and lag (end
// and lag null when its primary did not answer).
type groupPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Committed int64  `json:"committed"`
	End       *int64 `json:"end"`
	Lag       *int64 `json:"lag"`
	Metadata  string `json:"metadata,omitempty"`
}

func (groupList) httpAnswer()   {}
func (groupDetail) httpAnswer() {}

// registerGroups adds the groups routes when the node has a source.
func (h *API) registerGroups(src GroupsSource) {
	if src == nil {
		return
	}
	h.groups = src
	h.mux.HandleFunc("GET /v1/groups", h.listGroups)
	h.mux.HandleFunc("GET /v1/groups/{group}", h.describeGroup)
}

// groupsQuery is GET /v1/groups's query.
type groupsQuery struct {
	filter        string
	offset, limit int32
}

// parseGroupsQuery reads the listing's query, every parameter optional:
// filter (a substring of the names), offset, limit.
func parseGroupsQuery(q url.Values) (groupsQuery, error) {
	var gq groupsQuery
	if err := checkQuery(q, "filter", "offset", "limit"); err != nil {
		return gq, err
	}
	if f, ok := q["filter"]; ok {
		if len(f[0]) > wire.ConsumerNameBytesMax {
			return gq, wire.Errorf(wire.ErrInvalidRequest, "query parameter \"filter\" has %d bytes; at most %d", len(f[0]), wire.ConsumerNameBytesMax)
		}
		gq.filter = f[0]
	}
	off, err := queryInt(q, "offset", 0, 0, 1<<31-1)
	if err != nil {
		return gq, err
	}
	lim, err := queryInt(q, "limit", groupsPageDefault, 1, groupsPageMax)
	if err != nil {
		return gq, err
	}
	gq.offset, gq.limit = int32(off), int32(lim)
	return gq, nil
}

// pageGroups filters names by gq and cuts out its page; it returns the
// page and the count that passed the filter. Pure.
func pageGroups(names []string, gq groupsQuery) ([]string, int32) {
	var page []string
	total := int32(0)
	for _, n := range names {
		if gq.filter != "" && !strings.Contains(n, gq.filter) {
			continue
		}
		if total >= gq.offset && int32(len(page)) < gq.limit {
			page = append(page, n)
		}
		total++
	}
	return page, total
}

// onCoordinator runs the request on the metadata primary, the groups'
// coordinator, when one is known and this node can forward to it; it
// reports whether to answer here (false: forwarded and answered). A
// forwarded request is answered here, as every forwarded one is.
func (h *API) onCoordinator(w http.ResponseWriter, r *http.Request) bool {
	if r.Header.Get(forward.Header) != "" {
		return h.route(w, r, nil, h.self, wire.ErrNotMetadataPrimary)
	}
	lead, _ := h.svc.MetadataRoute()
	addr := h.httpAddrs(lead)
	if lead <= 0 || lead == h.self || h.jwtSecret == "" || addr == "" {
		return true // answered here, without members unless this node coordinates
	}
	h.forward(w, r, nil, lead, addr)
	return false
}

func (h *API) listGroups(w http.ResponseWriter, r *http.Request) {
	gq, err := parseGroupsQuery(r.URL.Query())
	if err != nil {
		h.fail(w, err)
		return
	}
	if !h.onCoordinator(w, r) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), partitionsLogTimeout)
	defer cancel()
	names, err := h.groups.GroupNames(ctx)
	if err != nil {
		h.fail(w, wire.Errorf(wire.ErrRequestTimedOut, "%v", err))
		return
	}
	page, total := pageGroups(names, gq)
	out := groupList{Total: total, Offset: gq.offset, Limit: gq.limit, CoordinatorID: -1, Groups: []groupSummary{}}
	offsets := make([][]service.CommittedOffset, len(page))
	for i, name := range page {
		s := groupSummary{Group: name}
		if m, ok := h.groups.GroupMembers(name); ok {
			out.CoordinatorID = h.self
			n := len(m.Members)
			s.State, s.Members = &m.State, &n
		}
		offs, err := await(func(done func([]service.CommittedOffset, error)) {
			h.svcOf(r).FetchOffsets(nil, &service.FetchOffsetsRequest{Consumer: name}, done)
		})
		if err != nil {
			code := native.CodeOf(err).Name
			s.Error = &code
		}
		offsets[i] = offs
		out.Groups = append(out.Groups, s)
	}
	if lead, _ := h.svc.MetadataRoute(); lead == h.self {
		out.CoordinatorID = h.self
	}
	ends := h.partitionEnds(ctx, r, offsets...)
	for i, offs := range offsets {
		for _, p := range groupPartitions(offs, ends) {
			out.Groups[i].Partitions++
			if p.Lag == nil {
				out.Groups[i].EndUnknown++
			} else {
				out.Groups[i].Lag += *p.Lag
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *API) describeGroup(w http.ResponseWriter, r *http.Request) {
	if err := checkQuery(r.URL.Query()); err != nil {
		h.fail(w, err)
		return
	}
	group := r.PathValue("group")
	if err := wire.ValidateConsumerName(group); err != nil {
		h.fail(w, err)
		return
	}
	if !h.onCoordinator(w, r) {
		return
	}
	offs, err := await(func(done func([]service.CommittedOffset, error)) {
		h.svcOf(r).FetchOffsets(nil, &service.FetchOffsetsRequest{Consumer: group}, done)
	})
	if err != nil {
		h.fail(w, err)
		return
	}
	out := groupDetail{Group: group, CoordinatorID: -1, Partitions: []groupPartition{}}
	if lead, _ := h.svc.MetadataRoute(); lead == h.self {
		out.CoordinatorID = h.self
	}
	m, member := h.groups.GroupMembers(group)
	if member {
		out.State, out.ProtocolType, out.Protocol, out.Generation, out.Members = &m.State, m.ProtocolType, m.Protocol, &m.Generation, m.Members
	}
	if len(offs) == 0 && !member {
		h.fail(w, wire.Errorf(wire.ErrUnknownConsumer, "no group or named consumer %q has committed offsets or members; GET /v1/groups lists them", group))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), partitionsLogTimeout)
	defer cancel()
	out.Partitions = groupPartitions(offs, h.partitionEnds(ctx, r, offs))
	for _, p := range out.Partitions {
		if p.Lag == nil {
			out.EndUnknown++
		} else {
			out.Lag += *p.Lag
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// groupPartitions pairs committed offsets with the ends known (ends by
// partitionName; missing: unknown). Pure.
func groupPartitions(offs []service.CommittedOffset, ends map[partitionName]int64) []groupPartition {
	out := make([]groupPartition, 0, len(offs))
	for _, o := range offs {
		if o.Offset < 0 {
			continue // nothing committed
		}
		p := groupPartition{Topic: o.Topic, Partition: o.Partition, Committed: o.Offset, Metadata: o.Metadata}
		if end, ok := ends[partitionName{Topic: o.Topic, Partition: o.Partition}]; ok {
			lag := max(end-o.Offset, 0)
			p.End, p.Lag = &end, &lag
		}
		out = append(out, p)
	}
	return out
}

// partitionEnds are the high watermarks of the partitions the offsets
// name, from their primaries (fillLogs), at most partitionsPageMax per
// round so that no primary is asked for more than its route takes.
func (h *API) partitionEnds(ctx context.Context, r *http.Request, groups ...[]service.CommittedOffset) map[partitionName]int64 {
	md, err := h.svcOf(r).Metadata(service.MetadataRequest{})
	if err != nil {
		return nil
	}
	primary := map[partitionName]int32{}
	for _, t := range md.Topics {
		for _, p := range t.Partitions {
			primary[partitionName{Topic: t.Name, Partition: p.Partition}] = p.PrimaryID
		}
	}
	seen := map[partitionName]bool{}
	var ps []partitionInfo
	for _, offs := range groups {
		for _, o := range offs {
			k := partitionName{Topic: o.Topic, Partition: o.Partition}
			if id, ok := primary[k]; ok && !seen[k] && o.Offset >= 0 {
				seen[k] = true
				ps = append(ps, partitionInfo{Topic: k.Topic, Partition: k.Partition, PrimaryID: id})
			}
		}
	}
	for from := 0; from < len(ps); from += partitionsPageMax {
		h.fillLogs(ctx, ps[from:min(from+partitionsPageMax, len(ps))])
	}
	out := make(map[partitionName]int64, len(ps))
	for _, p := range ps {
		if p.Log != nil {
			out[partitionName{Topic: p.Topic, Partition: p.Partition}] = p.Log.HighWatermark
		}
	}
	return out
}
