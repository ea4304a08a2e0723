package wire

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// TestRequestRoundTrip encodes every sample request as a frame, reads it
// back through the streaming reader and the header parser, decodes it and
// compares, then checks the body re-encodes to the same bytes.
func TestRequestRoundTrip(t *testing.T) {
	for i, req := range sampleRequests() {
		t.Run(fmt.Sprintf("%02d-%s", i, req.APIKey()), func(t *testing.T) {
			frame := AppendRequest([]byte("prefix"), uint32(1000+i), 0, req)[len("prefix"):]
			got, n, err := NextRequestFrame(frame, 0)
			if err != nil || n != len(frame) {
				t.Fatalf("NextRequestFrame: n=%d of %d, err=%v", n, len(frame), err)
			}
			h, body, err := ParseRequestHeader(got)
			if err != nil {
				t.Fatal(err)
			}
			want := RequestHeader{APIKey: req.APIKey(), APIVersion: 0, CorrelationID: uint32(1000 + i)}
			if h != want {
				t.Fatalf("header %+v, want %+v", h, want)
			}
			if err := h.Check(); err != nil {
				t.Fatal(err)
			}
			dec := NewRequest(h.APIKey)
			if err := dec.DecodeBody(body, h.APIVersion); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(dec, req) {
				t.Fatalf("decoded\n %+v\nwant\n %+v", dec, req)
			}
			if again := dec.AppendBody(nil, 0); !bytes.Equal(again, body) {
				t.Fatalf("re-encoded body differs:\n%x\n%x", again, body)
			}
		})
	}
}

// Fetch v1 carries the consumer's rack and the preferred read replica; v0
// carries neither, so a v0 peer decodes no rack and no preferred replica
// (NodeNone) whatever the sender meant, and a v1 frame is 4 bytes longer
// before the records, which AppendFetchResponseHeader must match.
func TestFetchV1Fields(t *testing.T) {
	req := &FetchRequest{PartitionRef: sampleRef, FetchOffset: 9, MaxBytes: 1, MinBytes: 1, MaxWaitMs: 1, Rack: "eu-1a"}
	for _, v := range []uint16{0, 1} {
		var got FetchRequest
		if err := got.DecodeBody(req.AppendBody(nil, v), v); err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		want := "eu-1a"
		if v == 0 {
			want = ""
		}
		if got.Rack != want {
			t.Errorf("request v%d: rack %q, want %q", v, got.Rack, want)
		}
	}
	resp := &FetchResponse{HighWatermark: 5, LogStartOffset: 1, PreferredReadReplica: 3, Records: sampleBatch}
	for _, v := range []uint16{0, 1} {
		frame := AppendResponse(nil, 7, v, resp)
		head := AppendFetchResponseHeader(nil, 7, v, 5, 1, 3, len(sampleBatch))
		if !bytes.Equal(append(head, sampleBatch...), frame) {
			t.Fatalf("v%d: the sendfile header differs from the whole frame", v)
		}
		if v == 1 && len(head) != FetchResponseHeaderBytesMax || v == 0 && len(head) != FetchResponseHeaderBytes {
			t.Errorf("v%d header is %d bytes", v, len(head))
		}
		_, body, err := ParseResponseHeader(frame[SizeFieldBytes:])
		if err != nil {
			t.Fatal(err)
		}
		var got FetchResponse
		if err := got.DecodeBody(body, v); err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		want := int32(3)
		if v == 0 {
			want = NodeNone
		}
		if got.PreferredReadReplica != want || !bytes.Equal(got.Records, sampleBatch) {
			t.Errorf("response v%d: preferred %d (want %d), %d record bytes", v, got.PreferredReadReplica, want, len(got.Records))
		}
	}
}

// TestResponseRoundTrip does the same for every sample response.
func TestResponseRoundTrip(t *testing.T) {
	for i, resp := range sampleResponses() {
		t.Run(fmt.Sprintf("%02d-%s", i, resp.APIKey()), func(t *testing.T) {
			frame := AppendResponse(nil, uint32(i), 0, resp)
			got, n, err := NextResponseFrame(frame, 0)
			if err != nil || n != len(frame) {
				t.Fatalf("NextResponseFrame: n=%d of %d, err=%v", n, len(frame), err)
			}
			h, body, err := ParseResponseHeader(got)
			if err != nil || h != (ResponseHeader{CorrelationID: uint32(i)}) {
				t.Fatalf("header %+v err %v", h, err)
			}
			dec := NewResponse(resp.APIKey())
			if err := DecodeResponseBody(h, body, 0, dec); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(dec, resp) {
				t.Fatalf("decoded\n %+v\nwant\n %+v", dec, resp)
			}
			if again := dec.AppendBody(nil, 0); !bytes.Equal(again, body) {
				t.Fatalf("re-encoded body differs")
			}
		})
	}
}

// TestEveryAPIHasSamplesAndConstructors keeps the table, the constructors
// and the samples in step.
func TestEveryAPIHasSamplesAndConstructors(t *testing.T) {
	reqs, resps := map[APIKey]bool{}, map[APIKey]bool{}
	for _, r := range sampleRequests() {
		reqs[r.APIKey()] = true
	}
	for _, r := range sampleResponses() {
		resps[r.APIKey()] = true
	}
	for i, a := range APIs() {
		if int(a.Key) != i {
			t.Errorf("api table entry %d has key %d", i, a.Key)
		}
		if r := NewRequest(a.Key); r == nil || r.APIKey() != a.Key {
			t.Errorf("NewRequest(%s) = %v", a.Key, r)
		}
		if r := NewResponse(a.Key); r == nil || r.APIKey() != a.Key {
			t.Errorf("NewResponse(%s) = %v", a.Key, r)
		}
		if !reqs[a.Key] || !resps[a.Key] {
			t.Errorf("%s lacks a sample request or response", a.Key)
		}
	}
	if NewRequest(APIKey(len(apiTable))) != nil || NewResponse(999) != nil {
		t.Error("constructors must return nil for unknown keys")
	}
}

// TestDecodeReusesStruct checks that decoding into a used struct leaves no
// stale values behind.
func TestDecodeReusesStruct(t *testing.T) {
	big := &MetadataResponse{}
	if err := big.DecodeBody(sampleResponses()[5].AppendBody(nil, 0), 0); err != nil {
		t.Fatal(err)
	}
	small := &MetadataResponse{MetadataPrimaryID: 3, Nodes: []Node{{ID: 3, ClientAddr: "h:1"}},
		Topics: []TopicMetadata{{Name: "z", Partitions: []PartitionRoute{{Partition: 0, PrimaryID: 3, Replicas: []int32{3}}}}}}
	if err := big.DecodeBody(small.AppendBody(nil, 0), 0); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(big, small) {
		t.Fatalf("reused decode\n %+v\nwant\n %+v", big, small)
	}
}

// TestTruncatedBodies decodes every strict prefix of every sample body:
// each must fail with a precise INVALID_REQUEST (requests) or a malformed
// response error, never panic.
func TestTruncatedBodies(t *testing.T) {
	for _, req := range sampleRequests() {
		body := req.AppendBody(nil, 0)
		for cut := 0; cut < len(body); cut++ {
			if cut > 64 && cut < len(body)-8 {
				continue // a large records field: the interesting cuts are at the ends
			}
			err := NewRequest(req.APIKey()).DecodeBody(body[:cut], 0)
			if !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("%s cut at %d of %d: err %v, want INVALID_REQUEST", req.APIKey(), cut, len(body), err)
			}
		}
		err := NewRequest(req.APIKey()).DecodeBody(append(body, 0xEE), 0)
		if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), "1 trailing bytes after the body") {
			t.Fatalf("%s with a trailing byte: %v", req.APIKey(), err)
		}
	}
	for _, resp := range sampleResponses() {
		body := resp.AppendBody(nil, 0)
		for cut := 0; cut < len(body); cut++ {
			err := NewResponse(resp.APIKey()).DecodeBody(body[:cut], 0)
			if !errors.Is(err, ErrMalformedResponse) {
				t.Fatalf("%s response cut at %d of %d: %v", resp.APIKey(), cut, len(body), err)
			}
		}
	}
}

// TestDecodeErrorMessages pins the precise text of decode failures.
func TestDecodeErrorMessages(t *testing.T) {
	produce := (&ProduceRequest{PartitionRef: sampleRef, Records: []byte{1, 2, 3}}).AppendBody(nil, 0)
	acksAt := partitionRefMinBytes + len("orders")
	badAcks := append([]byte(nil), produce...)
	badAcks[acksAt] = 7
	longTopic := (&FetchRequest{PartitionRef: PartitionRef{Topic: strings.Repeat("a", 250)}}).AppendBody(nil, 0)
	hugeCount := be.AppendUint32(nil, 0xFFFFFFFF)
	manyTopics := be.AppendUint32(nil, 1000)
	badBool := append((&CreateTopicRequest{Name: "a", Partitions: 1}).AppendBody(nil, 0)[:2+1+4+2+4], 2, 0, 0, 0, 0)
	bigRecords := append(produce[:acksAt+5:acksAt+5], 0x02, 0, 0, 0)

	cases := []struct {
		name string
		req  Request
		body []byte
		want string
	}{
		{"empty", &ProduceRequest{}, nil,
			"INVALID_REQUEST: Produce v0 request: field topic_id at byte 0: need 16 bytes, have 0"},
		{"bad acks", &ProduceRequest{}, badAcks,
			"INVALID_REQUEST: Produce v0 request: field acks at byte 32: 7 is not 0 (quorum) or 1 (primary)"},
		{"records over max", &ProduceRequest{}, bigRecords,
			"INVALID_REQUEST: Produce v0 request: field records at byte 37: length 33554432 exceeds the maximum 16777216"},
		{"short records", &ProduceRequest{}, produce[:len(produce)-1],
			"INVALID_REQUEST: Produce v0 request: field records at byte 41: need 3 bytes, have 2"},
		{"topic too long", &FetchRequest{}, longTopic,
			"INVALID_REQUEST: Fetch v0 request: field topic at byte 24: string of 250 bytes exceeds the maximum 249"},
		{"count over max", &MetadataRequest{}, hugeCount,
			"INVALID_REQUEST: Metadata v0 request: field topics at byte 0: count 4294967295 exceeds the maximum 65536"},
		{"count over bytes", &MetadataRequest{}, manyTopics,
			"INVALID_REQUEST: Metadata v0 request: field topics at byte 0: count 1000 needs at least 2000 bytes, have 0"},
		{"bad bool", &CreateTopicRequest{}, badBool,
			"INVALID_REQUEST: CreateTopic v0 request: field validate_only at byte 13: bool is 2, want 0 or 1"},
		{"empty body trailing", &ListTopicsRequest{}, []byte{0},
			"INVALID_REQUEST: ListTopics v0 request: field (end) at byte 0: 1 trailing bytes after the body"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.req.DecodeBody(c.body, 0)
			if err == nil || err.Error() != c.want {
				t.Fatalf("got  %v\nwant %s", err, c.want)
			}
			var er *ErrorResponse
			if !errors.As(err, &er) || er.Err != ErrInvalidRequest || CodeOf(err) != ErrInvalidRequest.Code {
				t.Fatalf("not an INVALID_REQUEST ErrorResponse: %#v", err)
			}
		})
	}
}

// TestHugeCountDoesNotAllocate: a count that the remaining bytes cannot
// hold is refused before any slice is made.
func TestHugeCountDoesNotAllocate(t *testing.T) {
	body := be.AppendUint32(nil, 60000)
	body = append(body, make([]byte, 100)...)
	var r MetadataResponse
	var err error
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		err = r.DecodeBody(body, 0)
	}
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrMalformedResponse) {
		t.Fatal(err)
	}
	// Only the error value and its message: a few hundred bytes per call.
	if perCall := (after.TotalAlloc - before.TotalAlloc) / 10; perCall > 2048 {
		t.Fatalf("%d bytes allocated per refused count", perCall)
	}
}

// TestValidate covers the semantic checks shared by client and broker.
func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		v    interface{ Validate() error }
		want *Error
		msg  string
	}{
		{"produce ok", &ProduceRequest{PartitionRef: sampleRef, Records: sampleBatch}, nil, ""},
		{"produce bad topic", &ProduceRequest{PartitionRef: PartitionRef{Topic: "a b"}, Records: sampleBatch}, ErrInvalidTopicName,
			`topic name "a b" has byte ' ' at 1; allowed: a-z A-Z 0-9 . _ -`},
		{"produce negative partition", &ProduceRequest{PartitionRef: PartitionRef{Topic: "a", Partition: -1}, Records: sampleBatch},
			ErrUnknownTopicOrPartition, `partition -1 of topic "a" does not exist: partition indexes start at 0`},
		{"produce bad generation", &ProduceRequest{PartitionRef: PartitionRef{Topic: "a", Generation: -2}, Records: sampleBatch},
			ErrInvalidRequest, "generation -2 is invalid: want -1 (unknown) or a term >= 0"},
		{"produce no records", &ProduceRequest{PartitionRef: sampleRef}, ErrCorruptMessage, "produce to orders/3 carries no record batch"},
		{"produce too large", &ProduceRequest{PartitionRef: sampleRef, Records: make([]byte, RecordsBytesMax+1)}, ErrMessageTooLarge,
			"record batch of 16777217 bytes exceeds the maximum 16777216"},
		{"fetch negative offset", &FetchRequest{PartitionRef: sampleRef, FetchOffset: -1}, ErrInvalidOffset, "fetch offset -1 is negative"},
		{"fetch ok", &FetchRequest{PartitionRef: sampleRef}, nil, ""},
		{"list offsets bad ts", &ListOffsetsRequest{PartitionRef: sampleRef, Timestamp: -3}, ErrInvalidTimestamp,
			"timestamp -3: want -2 (earliest), -1 (latest) or milliseconds >= 0"},
		{"list offsets latest", &ListOffsetsRequest{PartitionRef: sampleRef, Timestamp: TimestampLatest}, nil, ""},
		{"create ok", &CreateTopicRequest{Name: "a", Partitions: 1}, nil, ""},
		{"create zero partitions", &CreateTopicRequest{Name: "a"}, ErrInvalidPartitions, "topic a: 0 partitions is outside 1..16384"},
		{"create rf 33", &CreateTopicRequest{Name: "a", Partitions: 1, ReplicationFactor: 33}, ErrInvalidReplicationFactor,
			"topic a: replication factor 33 is outside 0 (cluster default) or 1..32"},
		{"create dup config", &CreateTopicRequest{Name: "a", Partitions: 1, Configs: []Config{{"k", "1"}, {"k", "2"}}},
			ErrInvalidConfig, `topic a: config key "k" given twice`},
		{"create empty config key", &CreateTopicRequest{Name: "a", Partitions: 1, Configs: []Config{{"", "1"}}},
			ErrInvalidConfig, "topic a: config entry 0 has an empty key"},
		{"add partitions over max", &AddPartitionsRequest{Name: "a", Partitions: PartitionsPerTopicMax + 1}, ErrInvalidPartitions,
			"topic a: 16385 partitions is outside 1..16384"},
		{"commit bad consumer", &CommitOffsetsRequest{Consumer: ".."}, ErrInvalidConsumerName, `consumer name may not be ".."`},
		{"fetch offsets empty consumer", &FetchOffsetsRequest{}, ErrInvalidConsumerName, "consumer name is empty"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.v.Validate()
			if c.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var er *ErrorResponse
			if !errors.Is(err, c.want) || !errors.As(err, &er) || er.Message != c.msg {
				t.Fatalf("got %v, want %s: %s", err, c.want.Name, c.msg)
			}
		})
	}
}

func TestPeekPartition(t *testing.T) {
	for _, req := range []Request{
		&ProduceRequest{PartitionRef: sampleRef, Records: sampleBatch},
		&FetchRequest{PartitionRef: sampleRef},
		&ListOffsetsRequest{PartitionRef: sampleRef},
	} {
		body := req.AppendBody(nil, 0)
		topic, part, ok := PeekPartition(req.APIKey(), body)
		if !ok || string(topic) != "orders" || part != 3 {
			t.Fatalf("%s: %q %d %v", req.APIKey(), topic, part, ok)
		}
		if _, _, ok := PeekPartition(req.APIKey(), body[:partitionRefMinBytes+2]); ok {
			t.Fatalf("%s: peek of a cut topic succeeded", req.APIKey())
		}
	}
	if _, _, ok := PeekPartition(APIMetadata, nil); ok {
		t.Fatal("peek of a non-data API succeeded")
	}
	body := (&FetchRequest{PartitionRef: sampleRef}).AppendBody(nil, 0)
	if n := testing.AllocsPerRun(100, func() { PeekPartition(APIFetch, body) }); n != 0 {
		t.Fatalf("PeekPartition allocates %v", n)
	}
}

func TestMetadataRoute(t *testing.T) {
	md := sampleResponses()[5].(*MetadataResponse)
	r, err := md.Route("orders", 3)
	if err != nil {
		t.Fatal(err)
	}
	want := Route{Ref: PartitionRef{Topic: "orders", TopicID: sampleTopicID, Partition: 3, Generation: 7},
		PrimaryID: 2, PrimaryAddr: "10.0.0.2:7070"}
	if r != want {
		t.Fatalf("route %+v, want %+v", r, want)
	}
	for _, c := range []struct {
		topic string
		part  int32
		want  *Error
	}{
		{"orders", 9, ErrUnknownTopicOrPartition},
		{"orders", 4, ErrPrimaryNotAvailable},
		{"nope", 0, ErrUnknownTopicOrPartition},
		{"absent", 0, ErrUnknownTopicOrPartition},
	} {
		if _, err := md.Route(c.topic, c.part); !errors.Is(err, c.want) {
			t.Errorf("Route(%s, %d) = %v, want %s", c.topic, c.part, err, c.want.Name)
		}
	}
}

func TestHandshakeNegotiation(t *testing.T) {
	if v, err := NegotiateProtocol(1, 9); err != nil || v != ProtocolVersionMax {
		t.Fatalf("NegotiateProtocol(1, 9) = %d, %v", v, err)
	}
	_, err := NegotiateProtocol(2, 3)
	if !errors.Is(err, ErrUnsupportedVersion) ||
		err.Error() != "UNSUPPORTED_VERSION: client protocol versions 2..3 do not overlap the server's 1..1" {
		t.Fatalf("NegotiateProtocol(2, 3): %v", err)
	}
	if _, err := NegotiateProtocol(0, 0); !errors.Is(err, ErrUnsupportedVersion) {
		t.Fatal("version 0 must be refused")
	}
	hs := ServerHandshake(1, 1, "c", "v", FrameBytesMaxDefault)
	if v, ok := hs.PickVersion(APIFetch); !ok || v != 1 {
		t.Fatalf("PickVersion(Fetch) = %d %v", v, ok)
	}
	hs.APIs = hs.APIs[:2]
	if _, ok := hs.PickVersion(APIFetch); ok {
		t.Fatal("PickVersion found an API the server did not list")
	}
	hs.APIs = []APIVersion{{Key: APIFetch, Min: 3, Max: 5}}
	if _, ok := hs.PickVersion(APIFetch); ok {
		t.Fatal("PickVersion found a version outside both ranges")
	}
}

func TestTopicID(t *testing.T) {
	s := sampleTopicID.String()
	if s != "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0" {
		t.Fatal(s)
	}
	id, err := ParseTopicID(strings.ToUpper(s))
	if err != nil || id != sampleTopicID {
		t.Fatalf("%v %v", id, err)
	}
	for _, bad := range []string{"", "0f1e2d3c4b5a69788796a5b4c3d2e1f0", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1fz"} {
		if _, err := ParseTopicID(bad); err == nil {
			t.Errorf("ParseTopicID(%q) succeeded", bad)
		}
	}
	if !(TopicID{}).IsZero() || sampleTopicID.IsZero() {
		t.Fatal("IsZero")
	}
}

func TestValidateTopicName(t *testing.T) {
	ok := []string{"a", "orders", "Orders.v2", "a_b-c", "...", strings.Repeat("x", 249)}
	for _, n := range ok {
		if err := ValidateTopicName(n); err != nil {
			t.Errorf("%q: %v", n, err)
		}
	}
	bad := map[string]string{
		"":                       "topic name is empty",
		".":                      `topic name may not be "."`,
		"..":                     `topic name may not be ".."`,
		strings.Repeat("x", 250): "topic name is 250 bytes, the maximum is 249",
		"a/b":                    `topic name "a/b" has byte '/' at 1; allowed: a-z A-Z 0-9 . _ -`,
		"é":                      `topic name "é" has byte 0xc3 at 0; allowed: a-z A-Z 0-9 . _ -`,
	}
	for n, want := range bad {
		err := ValidateTopicName(n)
		var er *ErrorResponse
		if !errors.As(err, &er) || er.Err != ErrInvalidTopicName || er.Message != want {
			t.Errorf("%q: got %v, want %s", n, err, want)
		}
	}
}
