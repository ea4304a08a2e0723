package groups

import (
	"errors"
	"testing"
	"time"
)

// Offsets staged by transactions: invisible and unstable until the
// commit marker, unstable still while the commit's records are not
// durable (else a fetch in between would read the offsets before the
// transaction as stable), then committed; an abort drops them; a
// refused write keeps them staged for the marker's retry; a member of an
// old generation cannot stage.
func TestTxnOffsets(t *testing.T) {
	log := &memLog{}
	c := NewLogged(noDelay, log)
	now := time.Unix(0, 0)
	tp := TopicPartition{Topic: "in", Partition: 0}
	stage := func(pid int64, off int64) error {
		var got error = errors.New("not answered")
		c.TxnCommit(now, "g", "", -1, pid, []Offset{{TopicPartition: tp, Offset: off}}, func(err error) { got = err })
		return got
	}
	committed := func() int64 { return c.Offsets("g", []TopicPartition{tp})[0].Offset }
	if err := stage(7, 10); err != nil {
		t.Fatal(err)
	}
	if !c.Unstable("g", nil) || !c.Unstable("g", []TopicPartition{tp}) || c.Unstable("g", []TopicPartition{{Topic: "in", Partition: 1}}) || c.Unstable("h", nil) {
		t.Fatal("staged offsets not unstable to the fetches of their partition only")
	}
	if committed() != -1 {
		t.Fatalf("a staged offset is visible: %d", committed())
	}
	// Commit, with the write held: unstable until it is durable.
	log.hold = true
	var ended error = errors.New("not answered")
	c.EndTxn(7, true, func(err error) { ended = err })
	if !c.Unstable("g", nil) || committed() != -1 || ended == nil {
		t.Fatalf("before the commit's write: unstable %v, committed %d, answered %v", c.Unstable("g", nil), committed(), ended)
	}
	log.release(errors.New("write refused"))
	if !c.Unstable("g", nil) || committed() != -1 || ended == nil || ended.Error() != "write refused" {
		t.Fatalf("after a refused write: unstable %v, committed %d, answered %v", c.Unstable("g", nil), committed(), ended)
	}
	c.EndTxn(7, true, func(err error) { ended = err }) // the marker's retry
	log.release(nil)
	if c.Unstable("g", nil) || committed() != 10 || ended != nil {
		t.Fatalf("after the commit: unstable %v, committed %d, answered %v", c.Unstable("g", nil), committed(), ended)
	}
	// An abort drops what the next transaction staged.
	log.hold = false
	if err := stage(7, 20); err != nil {
		t.Fatal(err)
	}
	c.EndTxn(7, false, func(err error) { ended = err })
	if c.Unstable("g", nil) || committed() != 10 || ended != nil {
		t.Fatalf("after the abort: unstable %v, committed %d, answered %v", c.Unstable("g", nil), committed(), ended)
	}
	// A group with members checks the member and generation.
	j := join(c, now, "", "range")
	if err := stage(8, 30); !errors.Is(err, ErrIllegalGeneration) {
		t.Fatalf("staging without a generation in a group with members (%+v): %v", j, err)
	}
}
