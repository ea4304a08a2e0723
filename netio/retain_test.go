package netio

import (
	"bytes"
	"math/rand"
	"testing"
)

// TestRetainedFramesOutliveLaterReads: frames a handler retained keep
// their bytes while the connection reads megabytes more (the shard reads
// into other buffers), frames too large for the shard's buffer are not
// retained, and released buffers are reused.
func TestRetainedFramesOutliveLaterReads(t *testing.T) {
	h := newTestHandler()
	ts := startServer(t, 1, Config{}, h)
	c := dialT(t, ts.addr())
	rng := rand.New(rand.NewSource(2))
	bufBytes := ts.srv.Config().ReadBufferBytes

	var stream, want []byte
	var retainable []bool
	corr := uint64(0)
	for total := 0; total < 4*bufBytes; {
		size := 1 + rng.Intn(20<<10)
		big := corr%50 == 7
		if big {
			size = bufBytes/2 + rng.Intn(bufBytes) // read into the connection's own buffer
		}
		p := make([]byte, size)
		rng.Read(p)
		stream = append(stream, request(corr, opRetain, p)...)
		if !big {
			want = append(want, p...)
		}
		retainable = append(retainable, !big)
		corr++
		total += size
	}
	go func() {
		// In odd pieces, so frames straddle reads.
		for i := 0; i < len(stream); i += 7919 {
			if _, err := c.Write(stream[i:min(i+7919, len(stream))]); err != nil {
				return
			}
		}
	}()
	for i := range retainable {
		got, _, p := c.mustRecv()
		if got != uint64(i) || len(p) != 1 {
			t.Fatalf("response %d: corr %d, %d bytes", i, got, len(p))
		}
		if (p[0] == 1) != retainable[i] {
			t.Fatalf("frame %d retained=%v, want %v", i, p[0] == 1, retainable[i])
		}
	}
	made := ts.srv.Stats().ReadBufsMade.Load()
	if made == 0 {
		t.Fatal("no read buffer replaced a retained one")
	}
	c.send(corr, opGiveBack, nil)
	if _, _, p := c.mustRecv(); !bytes.Equal(p, want) {
		t.Fatalf("the retained frames changed while later input was read (%d bytes back, want %d)", len(p), len(want))
	}

	// Released buffers come back: a few more retained frames need no new one.
	for i := 0; i < 3; i++ {
		c.send(corr+1+uint64(i), opRetain, []byte("again"))
		if _, _, p := c.mustRecv(); p[0] != 1 {
			t.Fatal("a small frame was not retained")
		}
	}
	c.send(corr+10, opGiveBack, nil)
	if _, _, p := c.mustRecv(); string(p) != "againagainagain" {
		t.Fatalf("gave back %q", p)
	}
	if now := ts.srv.Stats().ReadBufsMade.Load(); now != made {
		t.Fatalf("%d read buffers made after the releases, want none (released ones are reused)", now-made)
	}
}

// TestRetainOutsideOnFrame: Retain outside the delivery of c's frame
// returns nil and retains nothing.
func TestRetainOutsideOnFrame(t *testing.T) {
	ts := startServer(t, 1, Config{}, newTestHandler())
	c := dialT(t, ts.addr())
	c.send(1, opEcho, []byte("x"))
	c.mustRecv()
	onShard(t, ts.g, 0, func() {
		for conn := range ts.srv.loops[0].conns {
			if conn.Retain() != nil {
				t.Error("Retain outside OnFrame retained")
			}
		}
		if lp := ts.srv.loops[0]; lp.rbuf.refs != 0 {
			t.Errorf("read buffer refs %d", lp.rbuf.refs)
		}
	})
}
