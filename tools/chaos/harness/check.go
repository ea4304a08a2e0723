package harness

import (
	"encoding/binary"
	"fmt"
	"sort"
)

// Values. Every record a writer sends has an 8-byte big-endian key, its
// sequence number in its partition, and the value Value(name, seq), so
// that a record read back names its writer and its place.

// Value is the value of record seq of partition name ("topic/p").
func Value(name string, seq int64) []byte { return []byte(fmt.Sprintf("%s#%d", name, seq)) }

// Key is the key of record seq.
func Key(seq int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(seq)) }

// Written is one record read back from a partition.
type Written struct {
	Offset     int64
	Key, Value []byte
}

// Acked is one acknowledged write of a partition: its sequence number and
// the offset the broker gave (-1 when it answered a resent batch as a
// duplicate, offset unknown).
type Acked struct {
	Seq, Offset int64
}

// Violation is one broken promise found by Check.
type Violation struct {
	Partition string
	// What is "lost", "duplicated", "reordered", "moved" or "corrupt".
	What   string
	Detail string
}

func (v Violation) String() string { return fmt.Sprintf("%s: %s: %s", v.Partition, v.What, v.Detail) }

// CheckResult is what Check found in one partition.
type CheckResult struct {
	// Read counts the records read back; AckedPresent the acknowledged
	// writes found; Unacked the records present whose write was not
	// acknowledged (a failed or cut-off Produce may still have been
	// written: allowed, counted).
	Read, AckedPresent, Unacked int
	// Violations lists the first violationsMax; Counts counts every one
	// by What.
	Violations []Violation
	Counts     map[string]int
}

// violationsMax bounds the violations Check lists per partition.
const violationsMax = 20

// Check compares the records read back from partition name (in offset
// order) with its acknowledged writes: every acknowledged write must be
// present exactly once, at the offset it was acknowledged with, whole,
// and the acknowledged writes must appear in the order they were sent
// (sequence order). No record may appear twice, acknowledged or not.
func Check(name string, read []Written, acked []Acked) CheckResult {
	res := CheckResult{Counts: map[string]int{}}
	add := func(what, format string, args ...any) {
		res.Counts[what]++
		if len(res.Violations) < violationsMax {
			res.Violations = append(res.Violations, Violation{name, what, fmt.Sprintf(format, args...)})
		}
	}
	ackedAt := make(map[int64]int64, len(acked))
	for _, a := range acked {
		ackedAt[a.Seq] = a.Offset
	}
	seenAt := make(map[int64]int64, len(read))
	lastAcked := int64(-1)
	for _, w := range read {
		res.Read++
		if len(w.Key) != 8 {
			add("corrupt", "offset %d: a %d-byte key, want 8", w.Offset, len(w.Key))
			continue
		}
		seq := int64(binary.BigEndian.Uint64(w.Key))
		if string(w.Value) != string(Value(name, seq)) {
			add("corrupt", "offset %d: record %d has value %q", w.Offset, seq, w.Value)
			continue
		}
		if at, dup := seenAt[seq]; dup {
			add("duplicated", "record %d at offsets %d and %d", seq, at, w.Offset)
			continue
		}
		seenAt[seq] = w.Offset
		off, ok := ackedAt[seq]
		if !ok {
			res.Unacked++
			continue
		}
		res.AckedPresent++
		if off >= 0 && off != w.Offset {
			add("moved", "record %d acknowledged at offset %d, read at %d", seq, off, w.Offset)
		}
		if seq < lastAcked {
			add("reordered", "record %d at offset %d after record %d", seq, w.Offset, lastAcked)
		}
		lastAcked = max(lastAcked, seq)
	}
	var lost []int64
	for _, a := range acked {
		if _, ok := seenAt[a.Seq]; !ok {
			lost = append(lost, a.Seq)
		}
	}
	sort.Slice(lost, func(i, j int) bool { return lost[i] < lost[j] })
	for _, s := range lost {
		add("lost", "record %d acknowledged at offset %d is not in the log", s, ackedAt[s])
	}
	return res
}
