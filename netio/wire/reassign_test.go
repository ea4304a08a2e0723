package wire

import (
	"errors"
	"reflect"
	"testing"
)

// Reassign v1 carries the drain actions, the node fields and the throttle
// in requests, progress and the drains in responses; v0 reads what it
// always read and refuses the new actions.
func TestReassignV1(t *testing.T) {
	req := &ReassignRequest{Action: ReassignReplace, Node: 3, Replacement: 6, ThrottleBytesPerSecond: 1 << 20}
	var got ReassignRequest
	if err := got.DecodeBody(req.AppendBody(nil, 1), 1); err != nil || !reflect.DeepEqual(&got, req) {
		t.Fatalf("v1 request: %+v, %v", got, err)
	}
	if err := new(ReassignRequest).DecodeBody(req.AppendBody(nil, 0), 0); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("v0 replace: %v, want INVALID_REQUEST", err)
	}
	bad := &ReassignRequest{Action: 6}
	if err := new(ReassignRequest).DecodeBody(bad.AppendBody(nil, 1), 1); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("v1 action 6: %v", err)
	}
	neg := &ReassignRequest{ThrottleBytesPerSecond: -1}
	if err := new(ReassignRequest).DecodeBody(neg.AppendBody(nil, 1), 1); !errors.Is(err, ErrInvalidRequest) {
		t.Fatalf("negative throttle: %v", err)
	}
	resp := &ReassignResponse{
		Moves: []ReassignStatus{{Topic: "orders", Partition: 3, From: []int32{1, 2, 3}, Target: []int32{4, 2, 3},
			Driven: true, BytesBehind: 4096, Steps: []string{"learner_added 4"}, BytesMoved: 1 << 30, EtaMs: 1500}},
		Drains: []DrainStatus{{Node: 1, Replicas: 4, Primaries: 1, Moving: 2}, {Node: 5, Replacement: 6, Done: true}}}
	var r1 ReassignResponse
	if err := r1.DecodeBody(resp.AppendBody(nil, 1), 1); err != nil || !reflect.DeepEqual(&r1, resp) {
		t.Fatalf("v1 response: %+v, %v", r1, err)
	}
	var r0 ReassignResponse
	if err := r0.DecodeBody(resp.AppendBody(nil, 0), 0); err != nil || r0.Drains != nil || r0.Moves[0].BytesMoved != 0 || r0.Moves[0].BytesBehind != 4096 {
		t.Fatalf("v0 response: %+v, %v", r0, err)
	}
}
