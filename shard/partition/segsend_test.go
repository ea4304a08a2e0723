package partition

import (
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

// TestSegTransfer: chunks go one at a time in bounded size, the next from
// where the follower says it stands, a lost chunk is sent again after
// segResendTicks, and an adoption or refusal ends the transfer.
func TestSegTransfer(t *testing.T) {
	tr := &segTransfer{seg: segment.SealedSegment{Base: 100, Last: 199, Bytes: 2500}}
	step := func(wantPos, wantN int64) {
		t.Helper()
		pos, n, ok := tr.nextChunk(1000)
		if !ok || pos != wantPos || n != wantN {
			t.Fatalf("nextChunk = %d, %d, %v; want %d, %d", pos, n, ok, wantPos, wantN)
		}
		tr.sent()
		if _, _, ok := tr.nextChunk(1000); ok {
			t.Fatal("a second chunk while one is in flight")
		}
	}
	step(0, 1000)
	tr.answered(SegmentAnswer{Base: 100, Held: 1000})
	step(1000, 1000)
	// The chunk is lost: sent again after the resend ticks, not before.
	for i := 0; i < segResendTicks-1; i++ {
		tr.tick()
	}
	if _, _, ok := tr.nextChunk(1000); ok {
		t.Fatal("resent before segResendTicks")
	}
	tr.tick()
	step(1000, 1000)
	// The follower restarted and holds nothing: from the start again.
	tr.answered(SegmentAnswer{Base: 100, Held: 0})
	step(0, 1000)
	// An answer about another segment changes nothing.
	if tr.answered(SegmentAnswer{Base: 0, Status: SegmentAdopted}) {
		t.Fatal("an answer about another segment ended the transfer")
	}
	tr.answered(SegmentAnswer{Base: 100, Held: 2000})
	step(2000, 500)
	if done := tr.answered(SegmentAnswer{Base: 100, Held: 2500, Status: SegmentAdopted}); !done {
		t.Fatal("adopted but not done")
	}
	tr2 := &segTransfer{seg: tr.seg}
	step2, _, _ := tr2.nextChunk(1000)
	_ = step2
	tr2.sent()
	if done := tr2.answered(SegmentAnswer{Base: 100, Status: SegmentRefused}); !done {
		t.Fatal("refused but not done")
	}
}
