package node

import (
	"errors"
	"testing"

	"github.com/corestream/corestream/netio/wire"
)

// fuzzRequests are valid requests of every API, the seeds' base.
func fuzzRequests(id wire.TopicID) []wire.Request {
	ref := wire.PartitionRef{Topic: "fz", TopicID: id, Partition: 0, Generation: wire.GenerationUnknown}
	return []wire.Request{
		&wire.HandshakeRequest{ProtocolMin: 1, ProtocolMax: 1, ClientID: "fuzz"},
		&wire.ProduceRequest{PartitionRef: ref, Records: nil},
		&wire.FetchRequest{PartitionRef: ref, FetchOffset: 0, MaxBytes: 1 << 10},
		&wire.ListOffsetsRequest{PartitionRef: ref, Timestamp: wire.TimestampEarliest},
		&wire.MetadataRequest{Topics: []string{"fz"}},
		&wire.CreateTopicRequest{Name: "fz2", Partitions: 1, ReplicationFactor: 1},
		&wire.DeleteTopicRequest{Name: "fz2"},
		&wire.ListTopicsRequest{},
		&wire.DescribeTopicRequest{Name: "fz"},
		&wire.AddPartitionsRequest{Name: "fz", Partitions: 2},
		&wire.CommitOffsetsRequest{Consumer: "c", Offsets: []wire.OffsetCommit{{Topic: "fz", TopicID: id, Partition: 0, Offset: 1}}},
		&wire.FetchOffsetsRequest{Consumer: "c"},
		&wire.InitProducerRequest{ProducerID: -1, ProducerEpoch: -1},
		&wire.ClusterStatusRequest{},
		&wire.MovePrimaryRequest{Topic: "fz", Partition: 0, TargetNodeID: 1},
		&wire.RebalanceRequest{DryRun: true},
		&wire.DescribePartitionRequest{PartitionRef: ref},
	}
}

// fuzzPartitionsMax keeps fuzzed topic admin cheap: a node asked for
// thousands of partitions would spend the fuzzing time creating files.
const fuzzPartitionsMax = 4

// FuzzServeRequest sends one arbitrary request body under any API key to
// a running node, after a handshake. The node must answer it (a frame
// within the size limit never closes the connection), with the request's
// correlation id and a body that decodes as that API's response or as an
// error body; and a bystander connection must still be served afterwards.
// The wire decoders themselves are fuzzed in netio/wire (FuzzFrame) and
// the framing in netio (FuzzFraming); this target covers the handlers.
func FuzzServeRequest(f *testing.F) {
	n := runNode(f, f.TempDir(), smallFrames)
	by := dialHandshaken(f, n.ClientAddr())
	id := by.createTopic("fz", 1)
	for _, req := range fuzzRequests(id) {
		key := uint16(req.APIKey())
		if p, ok := req.(*wire.ProduceRequest); ok {
			p.Records = mkBatch(f, "seed")
		}
		body := req.AppendBody(nil, 0)
		f.Add(key, body)
		f.Add(key, []byte{})
		f.Add(key, append(append([]byte(nil), body...), 0xde, 0xad, 0xbe, 0xef))
		f.Add(key, make([]byte, badMaxFrameBytes-wire.RequestHeaderBytes))
	}
	f.Add(uint16(999), []byte{1, 2, 3})

	f.Fuzz(func(t *testing.T, key uint16, body []byte) {
		if len(body) > badMaxFrameBytes-wire.RequestHeaderBytes {
			return
		}
		if req := wire.NewRequest(wire.APIKey(key)); req != nil && req.DecodeBody(body, 0) == nil && tooCostly(req) {
			return
		}
		rc := dialHandshaken(t, n.ClientAddr())
		if err := rc.writeRaw(frame(wire.APIKey(key), 0, 42, 0, body)); err != nil {
			t.Fatal(err)
		}
		h, rbody, err := rc.read()
		if err != nil {
			t.Fatalf("api %d with %d bytes: %v", key, len(body), err)
		}
		if h.CorrelationID != 42 {
			t.Fatalf("answered correlation id %d", h.CorrelationID)
		}
		resp := wire.NewResponse(wire.APIKey(key))
		if resp == nil {
			if h.ErrorCode == wire.CodeNone {
				t.Fatalf("unknown API %d answered without an error", key)
			}
			resp = &wire.MetadataResponse{} // unused: the error body decodes
		}
		if err := wire.DecodeResponseBody(h, rbody, 0, resp); err != nil {
			var er *wire.ErrorResponse
			if !errors.As(err, &er) || er.Message == "" {
				t.Fatalf("api %d: undecodable answer: %v", key, err)
			}
		}
		rc.c.Close()
		by.t = t // inputs run one at a time in a fuzzing process
		by.metadata()
	})
}

// tooCostly reports whether a decoded request would make the node do
// slow work that proves nothing more: many partitions, long polls.
func tooCostly(req wire.Request) bool {
	switch r := req.(type) {
	case *wire.CreateTopicRequest:
		return r.Partitions > fuzzPartitionsMax
	case *wire.AddPartitionsRequest:
		return r.Partitions > fuzzPartitionsMax
	case *wire.FetchRequest:
		return r.MinBytes > 0 && r.MaxWaitMs > 100
	}
	return false
}
