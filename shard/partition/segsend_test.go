package partition

import (
	"fmt"
	"testing"

	"github.com/corestream/corestream/segment"
)

func TestSegmentPlan(t *testing.T) {
	// Three sealed segments of 1000 bytes each: 0..99, 100..199, 200..299;
	// the active one holds 300.. (500 bytes); segments are 1000 bytes.
	sealed := []segment.SealedSegment{{Base: 0, Last: 99, Bytes: 1000}, {Base: 100, Last: 199, Bytes: 1000}, {Base: 200, Last: 299, Bytes: 1000}}
	cases := []struct {
		name          string
		match, commit int64
		sealed        []segment.SealedSegment
		active        int64
		want          bool
		wantBase      int64
	}{
		{name: "new learner, empty log", match: -1, commit: 350, sealed: sealed, active: 500, want: true, wantBase: 0},
		{name: "at a boundary", match: 99, commit: 350, sealed: sealed, active: 500, want: true, wantBase: 100},
		{name: "last sealed, more than a segment behind with the active", match: 199, commit: 350, sealed: sealed, active: 500, want: true, wantBase: 200},
		{name: "last sealed, less than a segment behind", match: 199, commit: 350, sealed: sealed, active: 0, want: false},
		{name: "inside a segment: appends to its end", match: 150, commit: 350, sealed: sealed, active: 500, want: false},
		{name: "in the active segment", match: 299, commit: 350, sealed: sealed, active: 500, want: false},
		{name: "segment not wholly committed", match: 99, commit: 150, sealed: sealed, active: 500, want: false},
		{name: "committed exactly to its end", match: 99, commit: 199, sealed: sealed, active: 500, want: true, wantBase: 100},
		{name: "below the first sealed (retention cut): a reset first", match: -1, commit: 350, sealed: sealed[1:], active: 500, want: false},
		{name: "no sealed segment", match: -1, commit: 10, sealed: nil, active: 5000, want: false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, ok := SegmentPlan(c.match, c.commit, c.sealed, c.active, 1000)
			if ok != c.want || ok && s.Base != c.wantBase {
				t.Fatalf("SegmentPlan = %+v, %v; want base %d, %v", s, ok, c.wantBase, c.want)
			}
		})
	}
}

// TestSegTransfer: chunks of bounded size go up to the window ahead of
// what the follower holds; an answer that does not move it (a chunk lost)
// sends from there again, once; silence sends again after segResendTicks;
// a follower that restarted is sent the segment from the start; an
// adoption or refusal ends the transfer.
func TestSegTransfer(t *testing.T) {
	const chunk = 100
	tr := &segTransfer{seg: segment.SealedSegment{Base: 100, Last: 199, Bytes: 1050}}
	send := func(want ...int64) {
		t.Helper()
		var got []int64
		for {
			pos, n, ok := tr.nextChunk(chunk)
			if !ok {
				break
			}
			got = append(got, pos)
			tr.sent(n)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("chunks sent at %v, want %v", got, want)
		}
	}
	answer := func(held int64) {
		t.Helper()
		if tr.answered(SegmentAnswer{Base: 100, Held: held}) {
			t.Fatalf("done after holding %d", held)
		}
	}
	send(0, 100, 200, 300) // the window
	answer(100)
	send(400)
	answer(200)
	send(500)
	// The chunk at 300 was lost: the answer to 400 says 300 is wanted.
	answer(300)
	send(600)
	answer(300) // the answer to 400 sends from 300 again
	send(300, 400, 500, 600)
	answer(300) // the answers to 500 and 600 change nothing more
	answer(300)
	send()
	// Silence: nothing before segResendTicks, then from what is held.
	answer(400)
	send(700)
	for i := 0; i < segResendTicks-1; i++ {
		tr.tick()
	}
	send()
	tr.tick()
	send(400, 500, 600, 700)
	// The follower restarted and holds nothing: from the start.
	answer(0)
	send(0, 100, 200, 300)
	// An answer about another segment changes nothing.
	if tr.answered(SegmentAnswer{Base: 0, Status: SegmentAdopted}) {
		t.Fatal("an answer about another segment ended the transfer")
	}
	answer(900)
	send(900, 1000) // the last chunk is short: 50 bytes
	if done := tr.answered(SegmentAnswer{Base: 100, Held: 1050, Status: SegmentAdopted}); !done {
		t.Fatal("adopted but not done")
	}
	tr2 := &segTransfer{seg: tr.seg}
	if done := tr2.answered(SegmentAnswer{Base: 100, Status: SegmentRefused}); !done {
		t.Fatal("refused but not done")
	}
}
