package kafka

import (
	"slices"
	"testing"

	"github.com/corestream/corestream/cluster/service"
)

// TestReassignReplicas: a move lists Kafka's sets (every replica, target
// first; those added; those removed), and a cancelled one returning to
// its old replicas removes what it had added.
func TestReassignReplicas(t *testing.T) {
	for _, c := range []struct {
		m                          service.ReassignStatus
		replicas, adding, removing []int32
	}{
		{service.ReassignStatus{From: []int32{1, 2}, Target: []int32{1, 3}}, []int32{1, 3, 2}, []int32{3}, []int32{2}},
		{service.ReassignStatus{From: []int32{1, 2}, Target: []int32{3, 4}}, []int32{3, 4, 1, 2}, []int32{3, 4}, []int32{1, 2}},
		{service.ReassignStatus{From: []int32{1, 2}, Target: []int32{2, 1}}, []int32{2, 1}, nil, nil},
		{service.ReassignStatus{From: []int32{1, 2}, Target: []int32{1, 3}, Cancelled: true}, []int32{1, 2, 3}, []int32{2}, []int32{3}},
	} {
		r, a, rm := reassignReplicas(c.m)
		if !slices.Equal(r, c.replicas) || !slices.Equal(a, c.adding) || !slices.Equal(rm, c.removing) {
			t.Fatalf("%+v: %v %v %v, want %v %v %v", c.m, r, a, rm, c.replicas, c.adding, c.removing)
		}
	}
}
