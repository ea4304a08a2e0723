package clienttest

import (
	"bufio"
	"errors"
	"net"
	"testing"

	"go.uber.org/goleak"

	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/segment/batch"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rawConn speaks the protocol by hand, to test the fake without the SDK.
type rawConn struct {
	t    *testing.T
	nc   net.Conn
	br   *bufio.Reader
	corr uint32
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

// do sends req and decodes the answer into resp, returning the error body
// as an error.
func (r *rawConn) do(req wire.Request, resp wire.Response) error {
	r.t.Helper()
	r.corr++
	if _, err := r.nc.Write(wire.AppendRequest(nil, r.corr, 0, req)); err != nil {
		r.t.Fatal(err)
	}
	var size [4]byte
	if _, err := r.br.Read(size[:1]); err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.br.Read(size[1:]); err != nil {
		r.t.Fatal(err)
	}
	n := int(size[0])<<24 | int(size[1])<<16 | int(size[2])<<8 | int(size[3])
	frame := make([]byte, n)
	for got := 0; got < n; {
		k, err := r.br.Read(frame[got:])
		if err != nil {
			r.t.Fatal(err)
		}
		got += k
	}
	h, body, err := wire.ParseResponseHeader(frame)
	if err != nil || h.CorrelationID != r.corr {
		r.t.Fatalf("header %+v, %v", h, err)
	}
	return wire.DecodeResponseBody(h, body, 0, resp)
}

func newFake(t *testing.T, nodes int) *Cluster {
	t.Helper()
	c, err := NewCluster(Options{Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func TestHandshakeRequiredFirst(t *testing.T) {
	c := newFake(t, 1)
	r := dialRaw(t, c.Addr(1))
	err := r.do(&wire.ListTopicsRequest{}, &wire.ListTopicsResponse{})
	if !errors.Is(err, wire.ErrInvalidRequest) {
		t.Fatalf("request before handshake: %v", err)
	}
	var hs wire.HandshakeResponse
	if err := r.do(&wire.HandshakeRequest{ProtocolMin: 1, ProtocolMax: 1}, &hs); err != nil || hs.NodeID != 1 {
		t.Fatalf("handshake: %+v, %v", hs, err)
	}
	if err := r.do(&wire.ListTopicsRequest{}, &wire.ListTopicsResponse{}); err != nil {
		t.Fatal(err)
	}
}

// build makes a batch of n records for producer pid/epoch from seq.
func build(t *testing.T, n int, pid int64, epoch int16, seq int32) []byte {
	t.Helper()
	b, err := batch.NewBuilder(batch.Options{Idempotent: pid >= 0, ProducerID: pid, ProducerEpoch: epoch, BaseSequence: seq})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if err := b.AppendKV(int64(i), nil, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The broker's idempotence table, row by row (docs/protocol.md).
func TestIdempotenceRules(t *testing.T) {
	c := newFake(t, 1)
	if _, err := c.CreateTopic(TopicSpec{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, c.Addr(1))
	r.do(&wire.HandshakeRequest{ProtocolMin: 1, ProtocolMax: 1}, &wire.HandshakeResponse{})
	produce := func(b []byte) (int64, error) {
		var resp wire.ProduceResponse
		err := r.do(&wire.ProduceRequest{PartitionRef: wire.PartitionRef{Topic: "t", Generation: -1}, Records: b}, &resp)
		return resp.BaseOffset, err
	}
	steps := []struct {
		name  string
		batch []byte
		want  error
		base  int64
	}{
		{"unknown producer, seq 5", build(t, 1, 7, 0, 5), wire.ErrUnknownProducerID, 0},
		{"unknown producer, seq 0", build(t, 2, 7, 0, 0), nil, 0},
		{"next sequence", build(t, 3, 7, 0, 2), nil, 2},
		{"retry of a recent batch", build(t, 2, 7, 0, 0), nil, 0},
		{"gap", build(t, 1, 7, 0, 9), wire.ErrOutOfOrderSequence, 0},
		{"new epoch not at 0", build(t, 1, 7, 1, 5), wire.ErrOutOfOrderSequence, 0},
		{"new epoch at 0", build(t, 1, 7, 1, 0), nil, 5},
		{"old epoch", build(t, 1, 7, 0, 5), wire.ErrInvalidProducerEpoch, 0},
		{"not idempotent", build(t, 1, -1, -1, -1), nil, 6},
	}
	for _, s := range steps {
		base, err := produce(s.batch)
		if !errors.Is(err, s.want) || (s.want == nil && err != nil) {
			t.Fatalf("%s: got %v, want %v", s.name, err, s.want)
		}
		if s.want == nil && base != s.base {
			t.Fatalf("%s: base offset %d, want %d", s.name, base, s.base)
		}
	}
	for i := 1; i <= wire.IdempotentWindow+1; i++ { // push the first batches out of the window
		if _, err := produce(build(t, 1, 7, 1, int32(i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := produce(build(t, 1, 7, 1, 0)); !errors.Is(err, wire.ErrDuplicateSequence) {
		t.Fatalf("old sequence: %v", err)
	}
}

// A fetch returns whole batches, then the cut start of the next one, and
// routing checks answer with hints.
func TestFetchCutsAndRouting(t *testing.T) {
	c := newFake(t, 2)
	if _, err := c.CreateTopic(TopicSpec{Name: "t", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	r := dialRaw(t, c.Addr(1))
	r.do(&wire.HandshakeRequest{ProtocolMin: 1, ProtocolMax: 1}, &wire.HandshakeResponse{})
	b := build(t, 5, -1, -1, -1)
	for i := 0; i < 3; i++ {
		if err := r.do(&wire.ProduceRequest{PartitionRef: wire.PartitionRef{Topic: "t", Generation: -1}, Records: b}, &wire.ProduceResponse{}); err != nil {
			t.Fatal(err)
		}
	}
	var fr wire.FetchResponse
	maxBytes := uint32(len(b) + len(b)/2)
	if err := r.do(&wire.FetchRequest{PartitionRef: wire.PartitionRef{Topic: "t", Generation: -1}, FetchOffset: 7, MaxBytes: maxBytes}, &fr); err != nil {
		t.Fatal(err)
	}
	bs, tail, err := batch.Split(nil, fr.Records)
	if err != nil || len(bs) != 1 || len(tail) != len(b)/2 || fr.HighWatermark != 15 {
		t.Fatalf("fetch: %d batches, tail %d, hwm %d, %v", len(bs), len(tail), fr.HighWatermark, err)
	}
	if h, _ := batch.ReadHeader(bs[0]); h.BaseOffset != 5 {
		t.Fatalf("first batch base %d, want 5 (the batch holding offset 7)", h.BaseOffset)
	}
	if err := r.do(&wire.FetchRequest{PartitionRef: wire.PartitionRef{Topic: "t", Generation: -1}, FetchOffset: 16}, &fr); !errors.Is(err, wire.ErrOffsetOutOfRange) {
		t.Fatalf("fetch past the end: %v", err)
	}
	c.MovePrimary("t", 0, 2)
	err = r.do(&wire.ListOffsetsRequest{PartitionRef: wire.PartitionRef{Topic: "t", Generation: -1}}, &wire.ListOffsetsResponse{})
	var er *wire.ErrorResponse
	if !errors.As(err, &er) || !errors.Is(err, wire.ErrNotPrimary) || er.Hint == nil || er.Hint.NodeID != 2 || er.Hint.Address != c.Addr(2) || er.Hint.Generation != 2 {
		t.Fatalf("not primary: %v", err)
	}
	r2 := dialRaw(t, c.Addr(2))
	r2.do(&wire.HandshakeRequest{ProtocolMin: 1, ProtocolMax: 1}, &wire.HandshakeResponse{})
	err = r2.do(&wire.ListOffsetsRequest{PartitionRef: wire.PartitionRef{Topic: "t", Generation: 1}}, &wire.ListOffsetsResponse{})
	if !errors.Is(err, wire.ErrStaleGeneration) {
		t.Fatalf("stale generation: %v", err)
	}
	err = r2.do(&wire.ListOffsetsRequest{PartitionRef: wire.PartitionRef{Topic: "t", TopicID: wire.TopicID{1}, Generation: -1}}, &wire.ListOffsetsResponse{})
	if !errors.Is(err, wire.ErrUnknownTopicOrPartition) {
		t.Fatalf("wrong topic id: %v", err)
	}
}
