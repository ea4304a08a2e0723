package partition

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment"
)

// sendSegment is every replica's Config.SendSegment in the group tests:
// the chunk's bytes are read from the span (the node layer sends them by
// sendfile) and handed to the learner on its shard.
func (tg *testGroup) sendSegment(r *Replica, c *SegmentChunk) {
	data, err := c.Span.AppendTo(nil)
	c.Span.Release()
	if err != nil {
		return // the transfer resends after segResendTicks
	}
	cp := *c
	cp.Span, cp.Data = segment.Span{}, data
	to := tg.member(c.To)
	if to == nil {
		return
	}
	_ = to.sh.Post(func() {
		if to.r != nil && !to.r.closed {
			_ = to.r.ReceiveSegment(&cp)
		}
	})
}

// answerSegment is every replica's Config.AnswerSegment.
func (tg *testGroup) answerSegment(r *Replica, to raftlite.NodeID, a SegmentAnswer) {
	m := tg.member(to)
	if m == nil {
		return
	}
	_ = m.sh.Post(func() {
		if m.r != nil && !m.r.closed {
			m.r.SegmentAnswered(a)
		}
	})
}

// TestLearnerCatchesUpWithSegments: a learner added to a group whose
// primary holds many sealed segments receives them whole (counted by
// SegmentBytesSent), then the tail as appends, under a steady produce;
// its sealed segments are the primary's files byte for byte, it holds
// every acknowledged record, and it can be promoted.
func TestLearnerCatchesUpWithSegments(t *testing.T) {
	tg := newTestGroup(t)
	tg.segments = true
	tg.logCfg.SegmentBytes = 16 << 10
	for _, id := range ids123 {
		tg.start(id, ids123, nil)
	}
	p := tg.primary()
	big := string(make([]byte, 2000))
	for i := 0; i < 120; i++ {
		if res := produceOn(t, p, fmt.Sprintf("%d%s", i, big)); res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	var sealedBytes int64
	p.do(t, func() {
		for _, s := range p.r.log.SealedSegments(nil) {
			sealedBytes += s.Bytes
		}
	})
	if sealedBytes < 200<<10 {
		t.Fatalf("the primary holds %d bytes of sealed segments, want at least 200 KiB", sealedBytes)
	}
	prod := tg.startProducer()
	if res := tg.change(p, addLearner(4)); res.Err != nil {
		t.Fatalf("add learner 4: %v", res.Err)
	}
	m4 := tg.start(4, ids123, ids4)
	var end int64
	p.do(t, func() { end = p.r.log.LogEndOffset() })
	tg.waitFor(m4, "learner 4 catches up", func(r *Replica) bool { return r.CommitEnd() >= end && r.log.WrittenOffset() >= end-1 })
	if res := tg.change(p, promote(4, 10*time.Second)); res.Err != nil {
		t.Fatalf("promote 4: %v", res.Err)
	}
	acked := prod.finish()
	var sent int64
	p.do(t, func() { sent = p.r.SegmentBytesSent() })
	if sent < sealedBytes*3/4 {
		t.Fatalf("%d bytes went as segments, the primary held %d in sealed segments before the move", sent, sealedBytes)
	}
	// Every sealed segment of the learner below the high watermark is the
	// primary's file.
	var segs []segment.SealedSegment
	var hw int64
	m4.do(t, func() { segs, hw = m4.r.log.SealedSegments(nil), m4.r.CommitEnd() })
	same := 0
	for _, s := range segs {
		if s.Last >= hw {
			continue
		}
		name := fmt.Sprintf("%020d.log", s.Base)
		a, err1 := os.ReadFile(fmt.Sprintf("%s/n%d/p0/%s", tg.root, p.id, name))
		b, err2 := os.ReadFile(fmt.Sprintf("%s/n4/p0/%s", tg.root, name))
		if err1 != nil || err2 != nil {
			t.Fatalf("segment %s: %v, %v", name, err1, err2)
		}
		if !bytes.Equal(a, b) {
			t.Fatalf("segment %s of the learner differs from the primary's", name)
		}
		same++
	}
	if int64(same) < sealedBytes/(16<<10)/2 {
		t.Fatalf("only %d of the learner's segments compared", same)
	}
	tg.waitFor(m4, "node 4 holds every acknowledged record", func(r *Replica) bool {
		var maxOff int64 = -1
		for off := range acked {
			maxOff = max(maxOff, off)
		}
		return r.HighWatermark() > maxOff
	})
	got := tg.committed(m4)
	for off, v := range acked {
		if got[off] != v {
			t.Fatalf("node 4 has %q at %d, the primary acknowledged %q", got[off], off, v)
		}
	}
}
