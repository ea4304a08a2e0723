package offsets

import (
	"errors"
	"testing"

	"pgregory.net/rapid"
)

// A fresh partition: the leader no-op at raft 0, then records 1..3 and a
// configuration entry, a new term's no-op, more records. User offsets run
// 0..n-1 over the data records only.
func TestTableDenseFromZero(t *testing.T) {
	tb := New(0, 0)
	mustU := func(u int64, err error) int64 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	if got := mustU(tb.AppendConsensus(0)); got != 0 {
		t.Fatalf("no-op position %d, want 0", got)
	}
	if tb.EndUser() != 0 {
		t.Fatalf("a log of only its no-op ends at user %d, want 0", tb.EndUser())
	}
	if got := mustU(tb.AppendData(1, 3)); got != 0 {
		t.Fatalf("first data batch at user %d, want 0", got)
	}
	if got := mustU(tb.AppendConsensus(4)); got != 3 {
		t.Fatalf("configuration entry at user %d, want 3", got)
	}
	mustU(tb.AppendConsensus(5))
	if got := mustU(tb.AppendData(6, 7)); got != 3 {
		t.Fatalf("data after two consensus entries at user %d, want 3", got)
	}
	if tb.EndUser() != 5 || tb.EndRaft() != 8 {
		t.Fatalf("end user %d raft %d, want 5 and 8", tb.EndUser(), tb.EndRaft())
	}
	for u, want := range []int64{1, 2, 3, 6, 7, 8} {
		if r := mustU(tb.ToRaft(int64(u))); r != want {
			t.Errorf("ToRaft(%d) = %d, want %d", u, r, want)
		}
	}
	if got := tb.ConsensusAt(0, 5, nil); len(got) != 3 || got[0] != 0 || got[1] != 3 || got[2] != 3 {
		t.Errorf("ConsensusAt(0, 5) = %v, want [0 3 3]", got)
	}
	if _, err := tb.AppendData(9, 9); !errors.Is(err, ErrNotContiguous) {
		t.Errorf("gap append: %v, want ErrNotContiguous", err)
	}
	if _, err := tb.ToRaft(6); !errors.Is(err, ErrOutOfRange) {
		t.Errorf("ToRaft past the end: %v, want ErrOutOfRange", err)
	}
}

// kind is the model's entry at one raft offset.
type kind byte

const (
	kData kind = iota + 1
	kCons
)

// model is the obvious translation: one kind per raft offset from start.
type model struct {
	start, base int64
	kinds       []kind
}

func (m *model) end() int64 { return m.start + int64(len(m.kinds)) }

func (m *model) k(r int64) int64 {
	n := m.base
	for i := m.start; i < r; i++ {
		if m.kinds[i-m.start] == kCons {
			n++
		}
	}
	return n
}

// TestTableMatchesModel drives a table and the model with the same
// appends, truncations, start moves and resets, and checks every
// translation after each step, and that user offsets of data records are
// dense (each data record's user offset is the previous one's + 1).
func TestTableMatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		start := rapid.Int64Range(0, 50).Draw(rt, "start")
		base := rapid.Int64Range(0, start).Draw(rt, "base")
		tb, m := New(start, base), &model{start: start, base: base}
		steps := rapid.IntRange(1, 60).Draw(rt, "steps")
		for range steps {
			switch rapid.IntRange(0, 9).Draw(rt, "op") {
			case 0, 1, 2, 3:
				n := rapid.Int64Range(1, 5).Draw(rt, "records")
				b := m.end()
				u, err := tb.AppendData(b, b+n-1)
				if err != nil {
					rt.Fatal(err)
				}
				if want := b - m.k(b); u != want {
					rt.Fatalf("data at raft %d: user %d, want %d", b, u, want)
				}
				for range n {
					m.kinds = append(m.kinds, kData)
				}
			case 4, 5:
				r := m.end()
				if _, err := tb.AppendConsensus(r); err != nil {
					rt.Fatal(err)
				}
				m.kinds = append(m.kinds, kCons)
			case 6:
				end := rapid.Int64Range(m.start, m.end()).Draw(rt, "truncate")
				if err := tb.TruncateTo(end); err != nil {
					rt.Fatal(err)
				}
				m.kinds = m.kinds[:end-m.start]
			case 7:
				s := rapid.Int64Range(m.start, m.end()).Draw(rt, "advance")
				if err := tb.AdvanceStart(s); err != nil {
					rt.Fatal(err)
				}
				m.base = m.k(s)
				m.kinds = m.kinds[s-m.start:]
				m.start = s
			case 8:
				s := rapid.Int64Range(m.end(), m.end()+20).Draw(rt, "reset")
				b := rapid.Int64Range(m.k(m.end()), m.k(m.end())+s-m.end()).Draw(rt, "resetBase")
				tb.Reset(s, b)
				m.start, m.base, m.kinds = s, b, nil
			case 9:
				// No change: check only.
			}
			check(rt, tb, m)
		}
	})
}

func check(rt *rapid.T, tb *Table, m *model) {
	if tb.StartRaft() != m.start || tb.EndRaft() != m.end() || tb.Base() != m.base {
		rt.Fatalf("table [%d, %d) base %d, model [%d, %d) base %d",
			tb.StartRaft(), tb.EndRaft(), tb.Base(), m.start, m.end(), m.base)
	}
	if want := m.end() - m.k(m.end()); tb.EndUser() != want {
		rt.Fatalf("end user %d, want %d", tb.EndUser(), want)
	}
	next := m.start - m.base // the next data record's user offset
	var cons []int64
	for r := m.start; r <= m.end(); r++ {
		k, err := tb.K(r)
		if err != nil || k != m.k(r) {
			rt.Fatalf("K(%d) = %d, %v; want %d", r, k, err, m.k(r))
		}
		if r == m.end() {
			break
		}
		isCons := m.kinds[r-m.start] == kCons
		if tb.IsConsensus(r) != isCons {
			rt.Fatalf("IsConsensus(%d) = %v", r, !isCons)
		}
		u, err := tb.ToUser(r)
		if err != nil || u != next {
			rt.Fatalf("ToUser(%d) = %d, %v; want %d (dense)", r, u, err, next)
		}
		if isCons {
			cons = append(cons, u)
			continue
		}
		back, err := tb.ToRaft(u)
		if err != nil || back != r {
			rt.Fatalf("ToRaft(%d) = %d, %v; want %d", u, back, err, r)
		}
		next++
	}
	if got := tb.ConsensusAt(tb.StartUser(), tb.EndUser()+1, nil); len(got) != len(cons) {
		rt.Fatalf("ConsensusAt = %v, want %v", got, cons)
	} else {
		for i := range got {
			if got[i] != cons[i] {
				rt.Fatalf("ConsensusAt = %v, want %v", got, cons)
			}
		}
	}
}
