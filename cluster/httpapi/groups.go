package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"github.com/corestream/corestream/cluster/service/wirecode"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/corestream/corestream/cluster/forward"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/wire"
)

// Consumer groups and their lag (GET /v1/groups, GET /v1/groups/{group};
// docs/http.md). A group here is any name with committed offsets — a
// Kafka consumer group or a native named consumer, which share offsets
// by name — or a group a coordinator holds. A group's coordinator is the
// primary of its __groups partition (the service's FindCoordinator); it
// alone holds the group's members and committed offsets (the service's
// FetchOffsets, with the caller's permissions, answers NOT_COORDINATOR
// elsewhere). So a group is described on its coordinator: this node
// forwards the request there, and the listing asks every live node for
// the groups it coordinates, then each page's coordinators for their
// groups' figures. The end of each partition is its high watermark,
// asked of every primary at once as the partition listing asks
// (fillLogs); lag is the end minus the committed offset.

// Bounds of the groups routes.
const (
	// groupsPageDefault and groupsPageMax bound one page of the listing,
	// and one ask of a coordinator for its groups' figures.
	groupsPageDefault = 100
	groupsPageMax     = 1000
	// groupsGatherTimeout bounds the listing's wait for one node's
	// answer: a coordinator's figures include its own wait for the
	// partitions' ends (partitionsLogTimeout), so it waits for twice
	// that.
	groupsGatherTimeout = 2 * partitionsLogTimeout
)

// GroupsSource is the node's side of the groups routes.
type GroupsSource interface {
	// OwnGroups are the groups this node's coordinators hold, sorted.
	OwnGroups() []string
	// OldGroupNames are the names with committed offsets in the metadata
	// group (what was committed before groups moved to __groups),
	// sorted; an error when the metadata did not answer within ctx.
	OldGroupNames(ctx context.Context) ([]string, error)
	// GroupMembers is group's membership as this node's coordinator
	// holds it; false when this node does not coordinate the group or
	// holds no such group.
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
	// Assignment is the partitions the group's leader gave the member,
	// by topic in name order: empty before a sync, or when the group's
	// protocol type is not Kafka's "consumer" (its assignment is not the
	// consumer protocol's, and is not read).
	Assignment []GroupAssignedTopic `json:"assignment"`
}

// GroupAssignedTopic is one topic's partitions in a member's assignment.
type GroupAssignedTopic struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// groupList answers GET /v1/groups.
type groupList struct {
	Total  int32 `json:"total"`
	Offset int32 `json:"offset"`
	Limit  int32 `json:"limit"`
	// NodesUnanswered are the roster nodes that did not list the groups
	// they coordinate (down, unreachable, or too slow): their groups are
	// missing from the listing unless they have offsets from before
	// groups moved to __groups.
	NodesUnanswered []int32        `json:"nodes_unanswered"`
	Groups          []groupSummary `json:"groups"`
}

// groupSummary is one group of the listing.
type groupSummary struct {
	Group string `json:"group"`
	// CoordinatorID is the group's coordinator, which answered its
	// figures; -1 when none is known.
	CoordinatorID int32 `json:"coordinator_id"`
	// State and Members are null when the coordinator did not answer or
	// holds no such group (a group without members since the
	// coordinator's election).
	State   *string `json:"state"`
	Members *int    `json:"members"`
	// Partitions counts those with committed offsets; Lag sums their
	// lags whose end is known, EndUnknown counts those whose primary did
	// not answer (none, down, or too slow).
	Partitions int   `json:"partitions"`
	Lag        int64 `json:"lag"`
	EndUnknown int   `json:"end_unknown"`
	// Error is the code of why the offsets are not known: the caller may
	// not read them, or the coordinator did not answer.
	Error *string `json:"error"`
}

// groupDetail answers GET /v1/groups/{group}.
type groupDetail struct {
	Group         string  `json:"group"`
	CoordinatorID int32   `json:"coordinator_id"`
	State         *string `json:"state"`
	ProtocolType  string  `json:"protocol_type,omitempty"`
	Protocol      string  `json:"protocol,omitempty"`
	Generation    *int32  `json:"generation"`
	// Members is null when the coordinator holds no such group (a named
	// consumer, or a group without members since its election).
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

// groupNamesBody and groupNamesAnswer are POST /v1/groups/names, a
// node's part of the listing: the groups it coordinates whose names
// contain filter.
type groupNamesBody struct {
	Filter string `json:"filter"`
}

type groupNamesAnswer struct {
	NodeID int32    `json:"node_id"`
	Groups []string `json:"groups"`
}

// groupSummariesBody and groupSummariesAnswer are POST
// /v1/groups/summaries, a coordinator's part of the listing: the figures
// of the groups named, in the order asked.
type groupSummariesBody struct {
	Groups []string `json:"groups"`
}

type groupSummariesAnswer struct {
	NodeID int32          `json:"node_id"`
	Groups []groupSummary `json:"groups"`
}

func (groupList) httpAnswer()            {}
func (groupDetail) httpAnswer()          {}
func (groupNamesAnswer) httpAnswer()     {}
func (groupSummariesAnswer) httpAnswer() {}

// registerGroups adds the groups routes when the node has a source.
func (h *API) registerGroups(src GroupsSource) {
	if src == nil {
		return
	}
	h.groups = src
	h.mux.HandleFunc("GET /v1/groups", h.listGroups)
	h.mux.HandleFunc("GET /v1/groups/{group}", h.describeGroup)
	h.mux.HandleFunc("POST /v1/groups/names", h.groupNames)
	h.mux.HandleFunc("POST /v1/groups/summaries", h.groupSummaries)
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
		if err := checkGroupsFilter(f[0]); err != nil {
			return gq, err
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

func checkGroupsFilter(f string) error {
	if len(f) > wire.ConsumerNameBytesMax {
		return wire.Errorf(wire.ErrInvalidRequest, "filter has %d bytes; at most %d", len(f), wire.ConsumerNameBytesMax)
	}
	return nil
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

// onGroupCoordinator runs the request on group's coordinator when this
// node can forward to it; it reports whether to answer here (false:
// forwarded, or failed and answered). A forwarded request is answered
// where it lands, as every forwarded one is; one this node cannot
// forward (no http.jwt_secret, no http_addr) is answered here too, and
// the service's NOT_COORDINATOR names the coordinator.
func (h *API) onGroupCoordinator(w http.ResponseWriter, r *http.Request, group string) bool {
	if r.Header.Get(forward.Header) != "" {
		return h.route(w, r, nil, h.self, wire.ErrNotCoordinator)
	}
	c, err := h.svcOf(r).FindCoordinator(group)
	if err != nil {
		h.fail(w, err)
		return false
	}
	addr := h.httpAddrs(c.NodeID)
	if c.NodeID == h.self || h.jwtSecret == "" || addr == "" {
		return true
	}
	h.forward(w, r, nil, c.NodeID, addr)
	return false
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
	if !h.onGroupCoordinator(w, r, group) {
		return
	}
	offs, err := await(func(done func([]service.CommittedOffset, error)) {
		h.svcOf(r).FetchOffsets(nil, &service.FetchOffsetsRequest{Consumer: group}, done)
	})
	if err != nil {
		h.fail(w, err)
		return
	}
	// The offsets came from this node's coordinator of the group.
	out := groupDetail{Group: group, CoordinatorID: h.self, Partitions: []groupPartition{}}
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

func (h *API) listGroups(w http.ResponseWriter, r *http.Request) {
	gq, err := parseGroupsQuery(r.URL.Query())
	if err != nil {
		h.fail(w, err)
		return
	}
	names, unanswered := h.gatherGroupNames(r.Context(), gq.filter)
	ctx, cancel := context.WithTimeout(r.Context(), partitionsLogTimeout)
	old, err := h.groups.OldGroupNames(ctx)
	cancel()
	if err != nil {
		h.fail(w, wire.Errorf(wire.ErrRequestTimedOut, "%v", err))
		return
	}
	names = mergeNames(names, old)
	page, total := pageGroups(names, gq)
	out := groupList{Total: total, Offset: gq.offset, Limit: gq.limit, NodesUnanswered: unanswered, Groups: h.gatherSummaries(r, page)}
	writeJSON(w, http.StatusOK, out)
}

// mergeNames is the sorted union of sorted lists. Pure.
func mergeNames(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// gatherGroupNames asks every live node at once for the groups it
// coordinates whose names contain filter (this node answers its own),
// each within groupsGatherTimeout; it returns their sorted union and the
// nodes that did not answer, down ones included.
func (h *API) gatherGroupNames(ctx context.Context, filter string) ([]string, []int32) {
	ctx, cancel := context.WithTimeout(ctx, groupsGatherTimeout)
	defer cancel()
	brokers := h.svc.Brokers()
	lists := make([][]string, len(brokers))
	answered := make([]bool, len(brokers))
	var wg sync.WaitGroup
	for i, b := range brokers {
		switch {
		case b.ID == h.self:
			lists[i], answered[i] = filterNames(h.groups.OwnGroups(), filter), true
		case b.Alive && b.HTTPAddr != "":
			wg.Add(1)
			go func() {
				defer wg.Done()
				var a groupNamesAnswer
				if h.askNode(ctx, b.HTTPAddr, "/v1/groups/names", groupNamesBody{Filter: filter}, &a) && a.NodeID == b.ID {
					lists[i], answered[i] = a.Groups, true
				}
			}()
		}
	}
	wg.Wait()
	unanswered := []int32{}
	for i, b := range brokers {
		if !answered[i] {
			unanswered = append(unanswered, b.ID)
		}
	}
	return mergeNames(lists...), unanswered
}

// filterNames are the names that contain filter. Pure.
func filterNames(names []string, filter string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if strings.Contains(n, filter) {
			out = append(out, n)
		}
	}
	return out
}

// gatherSummaries are the figures of the groups named, in order, each
// from its coordinator: this node's own groups here, the others' asked
// of their coordinators at once, within groupsGatherTimeout. A group
// whose coordinator is not known or did not answer has its error set.
func (h *API) gatherSummaries(r *http.Request, names []string) []groupSummary {
	out := make([]groupSummary, len(names))
	byNode := map[int32][]int{}
	for i, name := range names {
		out[i] = groupSummary{Group: name, CoordinatorID: -1}
		c, err := h.svcOf(r).FindCoordinator(name)
		if err != nil {
			code := wirecode.CodeOf(err).Name
			out[i].Error = &code
			continue
		}
		out[i].CoordinatorID = c.NodeID
		byNode[c.NodeID] = append(byNode[c.NodeID], i)
	}
	ctx, cancel := context.WithTimeout(r.Context(), groupsGatherTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for id, idx := range byNode {
		ns := make([]string, len(idx))
		for j, i := range idx {
			ns[j] = names[i]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var got []groupSummary
			if id == h.self {
				got = h.ownSummaries(ctx, r, ns)
			} else if addr := h.httpAddrs(id); addr != "" {
				var a groupSummariesAnswer
				if h.askNode(ctx, addr, "/v1/groups/summaries", groupSummariesBody{Groups: ns}, &a) && a.NodeID == id {
					got = a.Groups
				}
			}
			for j, i := range idx {
				if j < len(got) && got[j].Group == names[i] {
					out[i] = got[j]
					out[i].CoordinatorID = id
					continue
				}
				code := wire.ErrNodeNotAvailable.Name
				out[i].Error = &code
			}
		}()
	}
	wg.Wait()
	return out
}

// askNode posts body to path on the node at addr, on behalf of the
// caller, and decodes a 200 answer into a; false when there is none.
func (h *API) askNode(ctx context.Context, addr, path string, body, a any) bool {
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.schemeOf()+"://"+addr+path, bytes.NewReader(b))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	onBehalf(ctx, req)
	resp, err := h.client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(a) == nil
}

// ownSummaries are the figures of the groups named as this node's
// coordinators hold them: membership, and the committed offsets (an
// error code where the caller may not read them, or this node does not
// coordinate the group) against the partitions' ends.
func (h *API) ownSummaries(ctx context.Context, r *http.Request, names []string) []groupSummary {
	out := make([]groupSummary, len(names))
	offsets := make([][]service.CommittedOffset, len(names))
	for i, name := range names {
		s := groupSummary{Group: name, CoordinatorID: h.self}
		if m, ok := h.groups.GroupMembers(name); ok {
			n := len(m.Members)
			s.State, s.Members = &m.State, &n
		}
		offs, err := await(func(done func([]service.CommittedOffset, error)) {
			h.svcCtx(ctx).FetchOffsets(nil, &service.FetchOffsetsRequest{Consumer: name}, done)
		})
		if err != nil {
			code := wirecode.CodeOf(err).Name
			s.Error = &code
		}
		offsets[i], out[i] = offs, s
	}
	ends := h.partitionEnds(ctx, r, offsets...)
	for i, offs := range offsets {
		for _, p := range groupPartitions(offs, ends) {
			out[i].Partitions++
			if p.Lag == nil {
				out[i].EndUnknown++
			} else {
				out[i].Lag += *p.Lag
			}
		}
	}
	return out
}

// groupNames answers POST /v1/groups/names: the groups this node
// coordinates whose names contain the body's filter.
func (h *API) groupNames(w http.ResponseWriter, r *http.Request) {
	var in groupNamesBody
	if _, ok := h.readJSON(w, r, &in); !ok {
		return
	}
	if err := checkGroupsFilter(in.Filter); err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, groupNamesAnswer{NodeID: h.self, Groups: filterNames(h.groups.OwnGroups(), in.Filter)})
}

// groupSummaries answers POST /v1/groups/summaries: the figures of the
// groups named, as this node's coordinators hold them.
func (h *API) groupSummaries(w http.ResponseWriter, r *http.Request) {
	var in groupSummariesBody
	if _, ok := h.readJSON(w, r, &in); !ok {
		return
	}
	if len(in.Groups) > groupsPageMax {
		h.fail(w, wire.Errorf(wire.ErrInvalidRequest, "body field \"groups\" has %d entries; at most %d", len(in.Groups), groupsPageMax))
		return
	}
	for i, g := range in.Groups {
		if err := wire.ValidateConsumerName(g); err != nil {
			h.fail(w, wire.Errorf(wire.ErrInvalidRequest, "body field \"groups[%d]\": %v", i, err))
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), partitionsLogTimeout)
	defer cancel()
	writeJSON(w, http.StatusOK, groupSummariesAnswer{NodeID: h.self, Groups: h.ownSummaries(ctx, r, in.Groups)})
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
