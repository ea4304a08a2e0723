package frontend

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/shard"
)

func TestFold(t *testing.T) {
	for _, tc := range []struct {
		owners []int
		want   int
	}{
		{nil, NoOwner},
		{[]int{-1}, NoOwner},
		{[]int{1}, 1},
		{[]int{1, 1, 1}, 1},
		{[]int{-1, 1, -1}, 1},
		{[]int{0, 1}, Spread},
		{[]int{1, 0, 1}, Spread},
		{[]int{0, 1, -1}, Spread},
	} {
		got := NoOwner
		for _, o := range tc.owners {
			got = Fold(got, o)
		}
		if got != tc.want {
			t.Errorf("Fold over %v = %d, want %d", tc.owners, got, tc.want)
		}
	}
}

func TestNilMoverMovesNothing(t *testing.T) {
	var m *Mover
	if o := m.Owner("t", 0); o != NoOwner {
		t.Fatalf("nil Mover's Owner = %d", o)
	}
	m.Track(nil, &Homing{}, 1)() // must not touch the connection
}

// The test protocol: a request is u8 op followed by the shards that own
// the partitions it names (one byte each, 0xFF for an unknown one); the
// answer is one byte, the shard that answered (or, for opCheckLent, 1 when
// the lent bytes were intact).
const (
	opData       = iota // answer at once
	opDataHold          // free the slot without an answer; the request stays open until opDataFinish
	opDataFinish        // finish the held requests, then answer
	opLend              // lend the read buffer twice (two "batches" of the frame) and keep their bytes
	opCheckLent         // answer whether the kept bytes are unchanged, and release them
)

type testConn struct {
	homing Homing
	held   []func()
	lent   [][]byte // lent slices of earlier frames
	copies [][]byte // what they held when lent
	gives  []func()
}

type testHandler struct{ m *Mover }

func (h *testHandler) OnOpen(c *netio.Conn) error                  { c.SetContext(&testConn{}); return nil }
func (h *testHandler) OnClose(*netio.Conn, error)                  {}
func (h *testHandler) OnFrameTooLarge(*netio.Conn, uint32, []byte) {}

func (h *testHandler) OnFrame(c *netio.Conn, body []byte) {
	st := c.Context().(*testConn)
	op, shards := body[0], body[1:]
	switch op {
	case opLend:
		half := len(shards) / 2
		for _, part := range [][]byte{shards[:half], shards[half:]} {
			release := Lend(c)()
			if release == nil {
				c.Reply(netio.Response{Header: []byte{0}})
				return
			}
			st.lent, st.copies, st.gives = append(st.lent, part), append(st.copies, bytes.Clone(part)), append(st.gives, release)
		}
		c.Reply(netio.Response{Header: []byte{1}})
		return
	case opCheckLent:
		ok := byte(1)
		for i := range st.lent {
			if !bytes.Equal(st.lent[i], st.copies[i]) {
				ok = 0
			}
			st.gives[i]()
		}
		st.lent, st.copies, st.gives = nil, nil, nil
		c.Reply(netio.Response{Header: []byte{ok}})
		return
	}
	owner := NoOwner
	for _, s := range shards {
		owner = Fold(owner, h.m.Route(c, "t", int32(s)))
	}
	done := h.m.Track(c, &st.homing, owner)
	switch op {
	case opDataHold:
		c.Release()
		st.held = append(st.held, done)
		return
	case opDataFinish:
		for _, d := range st.held {
			d()
		}
		st.held = nil
	}
	c.Reply(netio.Response{Header: []byte{byte(c.Shard().ID())}})
	done()
}

type rig struct {
	t          *testing.T
	addr       string
	migrations atomic.Uint64
	cross      atomic.Uint64
}

func startRig(t *testing.T) *rig {
	g, err := shard.NewGroup(shard.Config{Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t}
	m := NewMover(Config{Group: g, Migrations: &r.migrations, CrossShard: &r.cross,
		OwnerShard: func(_ string, p int32) int {
			if p == 0xFF {
				return -1
			}
			return int(p)
		}})
	srv, err := netio.NewServer(g, netio.Config{}, &testHandler{m: m})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	r.addr = srv.Addr().String()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := g.Stop(); err != nil {
			t.Errorf("group stop: %v", err)
		}
	})
	return r
}

type testClient struct {
	t *testing.T
	net.Conn
}

func (r *rig) dial() *testClient {
	c, err := net.DialTimeout("tcp", r.addr, 5*time.Second)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { c.Close() })
	return &testClient{t: r.t, Conn: c}
}

func (c *testClient) send(op byte, shards ...byte) {
	c.t.Helper()
	b := binary.BigEndian.AppendUint32(nil, uint32(1+len(shards)))
	b = append(append(b, op), shards...)
	if _, err := c.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

func (c *testClient) answer() int {
	c.t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		c.t.Fatal(err)
	}
	return int(b[0])
}

// call sends one request and returns the shard that answered it.
func (c *testClient) call(op byte, shards ...byte) int {
	c.t.Helper()
	c.send(op, shards...)
	return c.answer()
}

// home is the shard the connection is served on (a request naming no
// known partition moves nothing).
func (c *testClient) home() int { return c.call(opData, 0xFF) }

func TestMoverMigratesAfterStreak(t *testing.T) {
	r := startRig(t)
	c := r.dial()
	from := c.home()
	other := byte(1 - from)
	for i := 0; i < MigrateAfter-1; i++ {
		if got := c.call(opData, other, other); got != from {
			t.Fatalf("request %d answered on shard %d, want %d (moved before %d requests)", i, got, from, MigrateAfter)
		}
	}
	if got := c.call(opData, other); got != from {
		t.Fatalf("request %d answered on shard %d, want %d", MigrateAfter, got, from)
	}
	// The move happens after the answer: the next request is read there.
	if got := c.call(opData, other); got != int(other) {
		t.Fatalf("after %d requests for shard %d the connection is still served by %d", MigrateAfter, other, got)
	}
	if n := r.migrations.Load(); n != 1 {
		t.Errorf("migrations = %d, want 1", n)
	}
	// Calls: 2 for each of the first MigrateAfter-1 requests, then 1.
	if n, want := r.cross.Load(), uint64(2*(MigrateAfter-1)+1); n != want {
		t.Errorf("cross-shard calls = %d, want %d", n, want)
	}
}

func TestMoverStaysWhenSpreadOrOwn(t *testing.T) {
	r := startRig(t)
	c := r.dial()
	from := c.home()
	other := byte(1 - from)
	for i := 0; i < 3*MigrateAfter; i++ {
		shards := []byte{other}
		switch {
		case i%MigrateAfter == MigrateAfter-1:
			shards = []byte{byte(from)} // breaks the streak
		case i%2 == 0:
			shards = []byte{other, byte(from)} // spread over both
		}
		if got := c.call(opData, shards...); got != from {
			t.Fatalf("request %d (%v) answered on shard %d, want %d", i, shards, got, from)
		}
	}
	if n := r.migrations.Load(); n != 0 {
		t.Errorf("migrations = %d, want 0", n)
	}
}

// A request that frees its slot before its calls complete (a Kafka
// produce with acks 0) keeps the connection where it is until it is done.
func TestMoverWaitsForOpenRequests(t *testing.T) {
	r := startRig(t)
	c := r.dial()
	from := c.home()
	other := byte(1 - from)
	c.send(opDataHold, other) // no answer
	for i := 1; i < 2*MigrateAfter; i++ {
		if got := c.call(opData, other); got != from {
			t.Fatalf("request %d answered on shard %d with a request open, want %d", i, got, from)
		}
	}
	if n := r.migrations.Load(); n != 0 {
		t.Fatalf("migrations = %d with a request open, want 0", n)
	}
	if got := c.call(opDataFinish, other); got != from {
		t.Fatalf("the finishing request answered on shard %d, want %d", got, from)
	}
	if got := c.call(opData, other); got != int(other) {
		t.Fatalf("once every request was done the connection is still served by %d", got)
	}
}

// Lend retains the frame's read buffer once for each batch the log
// writes in place: the bytes stay as they were while later frames are
// read, until released.
func TestLendKeepsEveryBatchOfAFrame(t *testing.T) {
	r := startRig(t)
	c := r.dial()
	payload := make([]byte, 8<<10)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	if got := c.call(opLend, payload...); got != 1 {
		t.Fatal("the frame could not be lent")
	}
	junk := bytes.Repeat([]byte{0xFF}, 16<<10)
	for i := 0; i < 4; i++ {
		c.call(opData, junk...) // later frames, read into the shard's buffers
	}
	if got := c.call(opCheckLent); got != 1 {
		t.Fatal("lent bytes changed before they were released")
	}
}
