package rafttest

import (
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"
)

// The client history is checked against a sequential log: appends get
// increasing offsets, and a read (itself a marker appended to the log, so
// that it is linearised by consensus rather than by a possibly deposed
// leader) returns the whole log up to its marker. The log is represented by
// (length, rolling hash of ids, last offset), so states compare in O(1).

type opKind uint8

const (
	opAppend opKind = iota
	opRead
)

// opInput is what a client asked.
type opInput struct {
	kind opKind
	id   uint64 // unique per operation
}

// opOutput is what it got back: the entry's offsets, and for a read the
// log (length, hash) up to and including its marker.
type opOutput struct {
	base, last int64
	n          int
	hash       uint64
}

// logState is the model's state.
type logState struct {
	n    int
	hash uint64
	last int64
}

// chainHash folds id into h (FNV-style, order-sensitive).
func chainHash(h, id uint64) uint64 {
	if h == 0 {
		h = 14695981039346656037
	}
	for i := 0; i < 8; i++ {
		h ^= (id >> (8 * i)) & 0xff
		h *= 1099511628211
	}
	return h
}

var logModel = porcupine.Model{
	Init: func() interface{} { return logState{last: -1} },
	Step: func(state, input, output interface{}) (bool, interface{}) {
		s, in, out := state.(logState), input.(opInput), output.(opOutput)
		if out.base <= s.last || out.last < out.base {
			return false, s
		}
		next := logState{n: s.n + 1, hash: chainHash(s.hash, in.id), last: out.last}
		if in.kind == opRead && (out.n != next.n || out.hash != next.hash) {
			return false, s
		}
		return true, next
	},
	Equal: func(a, b interface{}) bool { return a.(logState) == b.(logState) },
	Hash: func(s interface{}) uint64 {
		st := s.(logState)
		return st.hash ^ uint64(st.n)<<40 ^ uint64(st.last)
	},
	DescribeOperation: func(input, output interface{}) string {
		in, out := input.(opInput), output.(opOutput)
		if in.kind == opRead {
			return fmt.Sprintf("read#%d -> %d-%d n=%d", in.id, out.base, out.last, out.n)
		}
		return fmt.Sprintf("append#%d -> %d-%d", in.id, out.base, out.last)
	},
}

// checkLinearizable runs porcupine over history. It returns an error when
// the history is not linearizable; a check that times out passes with
// ok=false so that the caller can report it.
func checkLinearizable(history []porcupine.Operation, timeout time.Duration) (checked bool, err error) {
	res := porcupine.CheckOperationsTimeout(logModel, history, timeout)
	switch res {
	case porcupine.Ok:
		return true, nil
	case porcupine.Illegal:
		return true, fmt.Errorf("linearizability: client history of %d operations is not linearizable", len(history))
	}
	return false, nil
}
