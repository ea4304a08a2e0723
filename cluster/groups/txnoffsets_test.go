package groups

import (
	"errors"
	"fmt"
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

// Staged offsets are records of the coordinator's log: a coordinator
// that replays the log of one that failed over with transactions open
// holds them staged (unstable, invisible), and the marker that reaches
// it decides them; a replay past the marker's tombstones holds none. A
// checkpoint carries them: a log cut at its begin replays to the same.
func TestTxnOffsetsSurviveFailover(t *testing.T) {
	log := &memLog{}
	cfg := noDelay
	cfg.CheckpointRecords, cfg.CheckpointBytes = 3, 0
	c := NewLogged(cfg, log)
	c.Loaded()
	tp := TopicPartition{Topic: "in", Partition: 0}
	stage := func(c *Coordinator, pid int64, group string, off int64) {
		t.Helper()
		var got error = errors.New("not answered")
		c.TxnCommit(t0, group, "", -1, pid, []Offset{{TopicPartition: tp, Offset: off}}, func(err error) { got = err })
		if got != nil {
			t.Fatal(got)
		}
	}
	stage(c, 7, "g", 10) // to commit
	stage(c, 8, "h", 20) // to abort
	// Enough plain commits for checkpoints, the staged offsets in them.
	for i := range 4 {
		commitG(t, c, t0, "other", "", -1, off("x", 0, int64(i)))
	}
	all := flat(log)
	begins := completeBegins(all)
	if len(begins) == 0 {
		t.Fatal("no complete checkpoint")
	}
	check := func(step string, c *Coordinator, gUnstable, hUnstable bool, gCommitted, hCommitted int64) {
		t.Helper()
		if c.Unstable("g", nil) != gUnstable || c.Unstable("h", nil) != hUnstable {
			t.Fatalf("%s: unstable g %v h %v, want %v %v", step, c.Unstable("g", nil), c.Unstable("h", nil), gUnstable, hUnstable)
		}
		if g, h := c.Offsets("g", []TopicPartition{tp})[0].Offset, c.Offsets("h", []TopicPartition{tp})[0].Offset; g != gCommitted || h != hCommitted {
			t.Fatalf("%s: committed g %d h %d, want %d %d", step, g, h, gCommitted, hCommitted)
		}
	}
	for _, from := range []int{0, begins[len(begins)-1]} {
		next := replayed(t, [][]Record{all[from:]})
		check(fmt.Sprintf("replayed from record %d", from), next, true, true, -1, -1)
		// The markers reach the new coordinator.
		next.EndTxn(7, true, func(err error) {
			if err != nil {
				t.Fatal(err)
			}
		})
		next.EndTxn(8, false, func(err error) {
			if err != nil {
				t.Fatal(err)
			}
		})
		check("decided after the failover", next, false, false, 10, -1)
	}
	// Decided by the first coordinator: a replay past the tombstones
	// holds nothing staged.
	c.EndTxn(7, true, func(error) {})
	c.EndTxn(8, false, func(error) {})
	check("decided", c, false, false, 10, -1)
	check("replayed after the markers", replayed(t, [][]Record{flat(log)}), false, false, 10, -1)
}
