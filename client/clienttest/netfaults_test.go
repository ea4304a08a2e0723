package clienttest

import (
	"errors"
	"testing"
	"time"

	"github.com/corestream/corestream/netio/wire"
)

func handshaken(t *testing.T, c *Cluster, node int32) *rawConn {
	t.Helper()
	r := dialRaw(t, c.Addr(node))
	if err := r.do(&wire.HandshakeRequest{ProtocolMin: 1, ProtocolMax: 1}, &wire.HandshakeResponse{}); err != nil {
		t.Fatal(err)
	}
	return r
}

// A node cut off from its peers answers from the routes it knew: itself
// alone alive, no metadata primary, no primary where it does not lead; it
// refuses data requests without hints; the other nodes report it down.
// Heal ends it.
func TestCutOffNodeAnswersPartialView(t *testing.T) {
	c := newFake(t, 3)
	id, err := c.CreateTopic(TopicSpec{Name: "t", Partitions: 3}) // primaries 1, 2, 3
	if err != nil {
		t.Fatal(err)
	}
	cut, healthy := handshaken(t, c, 3), handshaken(t, c, 1)
	c.CutOff(3)
	var md wire.MetadataResponse
	if err := cut.do(&wire.MetadataRequest{}, &md); err != nil {
		t.Fatal(err)
	}
	if md.MetadataPrimaryID != wire.NodeNone || !md.Nodes[2].Alive || md.Nodes[0].Alive || md.Nodes[1].Alive {
		t.Fatalf("cut-off view: primary %d, nodes %+v", md.MetadataPrimaryID, md.Nodes)
	}
	parts := md.Topics[0].Partitions
	if parts[0].ErrorCode != wire.ErrNotEnoughReplicas.Code || parts[0].PrimaryID != wire.NodeNone ||
		parts[2].ErrorCode != wire.CodeNone || parts[2].PrimaryID != 3 {
		t.Fatalf("cut-off routes: %+v", parts)
	}
	ref := func(p, gen int32) wire.PartitionRef {
		return wire.PartitionRef{Topic: "t", TopicID: id, Partition: p, Generation: gen}
	}
	produce := &wire.ProduceRequest{PartitionRef: ref(2, 1), Records: build(t, 1, -1, -1, 0)}
	if err := cut.do(produce, &wire.ProduceResponse{}); !errors.Is(err, wire.ErrNotEnoughReplicas) {
		t.Fatalf("produce to the partition it leads: %v", err)
	}
	var er *wire.ErrorResponse
	err = cut.do(&wire.ListOffsetsRequest{PartitionRef: ref(0, 1), Timestamp: wire.TimestampLatest}, &wire.ListOffsetsResponse{})
	if !errors.Is(err, wire.ErrNotPrimary) || !errors.As(err, &er) || er.Hint != nil {
		t.Fatalf("a partition it does not lead: %v (hint %+v)", err, er)
	}
	if err := healthy.do(&wire.MetadataRequest{}, &md); err != nil || md.Nodes[2].Alive || md.MetadataPrimaryID != 1 {
		t.Fatalf("healthy view: %+v, %v", md.Nodes, err)
	}
	c.Heal(3)
	if err := cut.do(produce, &wire.ProduceResponse{}); err != nil {
		t.Fatalf("after the heal: %v", err)
	}
}

// A hung node answers nothing, on old or new connections, until Resume;
// then it handles the backlog in order.
func TestHungNodeAnswersAfterResume(t *testing.T) {
	c := newFake(t, 2)
	r := handshaken(t, c, 1)
	c.Hang(1)
	r.nc.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	var size [1]byte
	r.nc.Write(wire.AppendRequest(nil, 100, 0, &wire.ListTopicsRequest{}))
	if _, err := r.nc.Read(size[:]); err == nil {
		t.Fatal("a hung node answered")
	}
	r.nc.SetReadDeadline(time.Time{})
	var md wire.MetadataResponse
	if err := handshaken(t, c, 2).do(&wire.MetadataRequest{}, &md); err != nil || md.Nodes[0].Alive {
		t.Fatalf("node 2 reports node 1 alive (%v)", err)
	}
	c.Resume(1)
	frame, err := readResponse(r)
	if err != nil {
		t.Fatal(err)
	}
	if h, _, err := wire.ParseResponseHeader(frame); err != nil || h.CorrelationID != 100 {
		t.Fatalf("after Resume: %+v, %v", h, err)
	}
}

// readResponse reads one response frame from r.
func readResponse(r *rawConn) ([]byte, error) {
	var size [4]byte
	for got := 0; got < 4; {
		n, err := r.br.Read(size[got:])
		if err != nil {
			return nil, err
		}
		got += n
	}
	n := int(size[0])<<24 | int(size[1])<<16 | int(size[2])<<8 | int(size[3])
	frame := make([]byte, n)
	for got := 0; got < n; {
		k, err := r.br.Read(frame[got:])
		if err != nil {
			return nil, err
		}
		got += k
	}
	return frame, nil
}
