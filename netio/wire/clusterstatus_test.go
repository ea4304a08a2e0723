package wire

import (
	"reflect"
	"testing"
)

// ClusterStatus v1 carries each node's Kafka address; v0 leaves it out,
// so a v0 peer reads what it always read.
func TestClusterStatusKafkaAddr(t *testing.T) {
	resp := &ClusterStatusResponse{MetadataPrimaryID: 1, Nodes: []NodeStatus{
		{ID: 1, ClientAddr: "10.0.0.1:7070", KafkaAddr: "10.0.0.1:9092", Alive: true},
		{ID: 2, ClientAddr: "10.0.0.2:7070"}}}
	var v1 ClusterStatusResponse
	if err := v1.DecodeBody(resp.AppendBody(nil, 1), 1); err != nil || !reflect.DeepEqual(&v1, resp) {
		t.Fatalf("v1: %+v, %v", v1, err)
	}
	var v0 ClusterStatusResponse
	if err := v0.DecodeBody(resp.AppendBody(nil, 0), 0); err != nil || v0.Nodes[0].KafkaAddr != "" || v0.Nodes[0].ClientAddr != "10.0.0.1:7070" {
		t.Fatalf("v0: %+v, %v", v0, err)
	}
	if len(resp.AppendBody(nil, 1)) != len(resp.AppendBody(nil, 0))+2*2+len("10.0.0.1:9092") {
		t.Fatal("v1 adds one string per node")
	}
}

// ClusterStatus v2 adds each node's draining flag and the cluster id; v1
// reads what it always read.
func TestClusterStatusV2(t *testing.T) {
	resp := &ClusterStatusResponse{MetadataPrimaryID: 1, ClusterID: "5b6f1f5e-3c1a-4a43-9a36-0c2e0f6d2b11", Nodes: []NodeStatus{
		{ID: 1, ClientAddr: "10.0.0.1:7070", Alive: true, Draining: true}, {ID: 2, ClientAddr: "10.0.0.2:7070"}}}
	var v2 ClusterStatusResponse
	if err := v2.DecodeBody(resp.AppendBody(nil, 2), 2); err != nil || !reflect.DeepEqual(&v2, resp) {
		t.Fatalf("v2: %+v, %v", v2, err)
	}
	var v1 ClusterStatusResponse
	if err := v1.DecodeBody(resp.AppendBody(nil, 1), 1); err != nil || v1.ClusterID != "" || v1.Nodes[0].Draining {
		t.Fatalf("v1: %+v, %v", v1, err)
	}
}
