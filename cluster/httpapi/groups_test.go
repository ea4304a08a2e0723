package httpapi

import (
	"reflect"
	"testing"

	"github.com/corestream/corestream/cluster/service"
)

// The groups answers join the snake-case check (shape_test.go).
func init() {
	httpAnswers = append(httpAnswers, groupList{}, groupDetail{}, groupNamesAnswer{}, groupSummariesAnswer{})
}

// The listing filters by substring and pages what passed; the total
// counts every match.
func TestPageGroups(t *testing.T) {
	names := []string{"billing", "orders-a", "orders-b", "orders-c", "stock"}
	cases := []struct {
		q     groupsQuery
		page  []string
		total int32
	}{
		{groupsQuery{limit: 100}, names, 5},
		{groupsQuery{limit: 2}, names[:2], 5},
		{groupsQuery{offset: 4, limit: 2}, names[4:], 5},
		{groupsQuery{filter: "orders", offset: 1, limit: 1}, []string{"orders-b"}, 3},
		{groupsQuery{filter: "none", limit: 10}, nil, 0},
		{groupsQuery{offset: 9, limit: 10}, nil, 5},
	}
	for _, c := range cases {
		page, total := pageGroups(names, c.q)
		if !reflect.DeepEqual(page, c.page) || total != c.total {
			t.Errorf("%+v: %v of %d, want %v of %d", c.q, page, total, c.page, c.total)
		}
	}
}

// A partition's lag is its end minus the committed offset, never below
// 0; an end not known leaves end and lag null; an entry with nothing
// committed is left out.
func TestGroupPartitions(t *testing.T) {
	offs := []service.CommittedOffset{
		{Topic: "t", Partition: 0, Offset: 3},
		{Topic: "t", Partition: 1, Offset: 9},
		{Topic: "t", Partition: 2, Offset: 1},
		{Topic: "t", Partition: 3, Offset: -1},
	}
	ends := map[partitionName]int64{{"t", 0}: 10, {"t", 1}: 7, {"t", 3}: 5}
	got := groupPartitions(offs, ends)
	if len(got) != 3 {
		t.Fatalf("%d partitions, want 3 (nothing committed on t/3): %+v", len(got), got)
	}
	for i, want := range []*int64{ptr(int64(7)), ptr(int64(0)), nil} {
		p := got[i]
		switch {
		case want == nil && (p.Lag != nil || p.End != nil):
			t.Errorf("t/%d: end %v lag %v with no end known", p.Partition, p.End, p.Lag)
		case want != nil && (p.Lag == nil || *p.Lag != *want):
			t.Errorf("t/%d: lag %v, want %d", p.Partition, p.Lag, *want)
		}
	}
}

// The listing's names are the union of the nodes' lists, each group
// once (a group listed by two nodes while its coordinator moves), sorted;
// a node's list keeps the names containing the filter.
func TestMergeAndFilterNames(t *testing.T) {
	got := mergeNames([]string{"b", "d"}, nil, []string{"a", "b", "e"}, []string{"c"})
	if want := []string{"a", "b", "c", "d", "e"}; !reflect.DeepEqual(got, want) {
		t.Errorf("merged %v, want %v", got, want)
	}
	if got := mergeNames(); len(got) != 0 {
		t.Errorf("merged nothing into %v", got)
	}
	if got, want := filterNames([]string{"orders-a", "stock", "orders-b"}, "orders"), []string{"orders-a", "orders-b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("filtered %v, want %v", got, want)
	}
	if got := filterNames([]string{"a"}, ""); !reflect.DeepEqual(got, []string{"a"}) {
		t.Errorf("an empty filter kept %v", got)
	}
}

func ptr[T any](v T) *T { return &v }
