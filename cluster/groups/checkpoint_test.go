package groups

import (
	"fmt"
	"reflect"
	"testing"
)

// flat is every record of l, in log order.
func flat(l *memLog) []Record {
	var all []Record
	for _, b := range l.batches {
		all = append(all, b...)
	}
	return all
}

// completeBegins are the positions of the begin markers of l's complete
// checkpoints, as a tracker finds them.
func completeBegins(all []Record) []int {
	var out []int
	tr := NewCheckpointTracker()
	last := int64(-1)
	for i, r := range all {
		tr.Observe(int64(i), r.Key, r.Value)
		if c := tr.Complete(); c != last {
			out, last = append(out, int(c)), c
		}
	}
	return out
}

// TestCheckpointReplayEqualsLive drives a coordinator that checkpoints
// every k records through joins, syncs, commits, offset and group
// deletes, and checks after each step that the whole log, and the log
// cut at the begin marker of each complete checkpoint, replay to the
// live state.
func TestCheckpointReplayEqualsLive(t *testing.T) {
	for _, k := range []int64{1, 2, 3, 7} {
		t.Run(fmt.Sprint("every ", k), func(t *testing.T) {
			log := &memLog{}
			cfg := noDelay
			cfg.CheckpointRecords, cfg.CheckpointBytes = k, 0
			c := NewLogged(cfg, log)
			c.Loaded()
			now := t0
			j := joinG(c, now, "g", "", "")
			a, gen := j.res.MemberID, j.res.Generation
			syncG(c, now, "g", a, gen, map[string][]byte{a: []byte("all")})
			check := func(step string) {
				t.Helper()
				all, want := flat(log), view(c)
				if got := view(replayed(t, [][]Record{all})); !reflect.DeepEqual(got, want) {
					t.Fatalf("%s: replay of %d records\n got %+v\nwant %+v", step, len(all), got, want)
				}
				for _, b := range completeBegins(all) {
					if got := view(replayed(t, [][]Record{all[b:]})); !reflect.DeepEqual(got, want) {
						t.Fatalf("%s: replay from the checkpoint at %d of %d\n got %+v\nwant %+v", step, b, len(all), got, want)
					}
				}
			}
			for i := 0; i < 20; i++ {
				commitG(t, c, now, "g", a, gen, off("t", int32(i%3), int64(i)))
				commitG(t, c, now, "h", "", -1, off("u", 0, int64(i)))
				check(fmt.Sprint("commit ", i))
			}
			c.DeleteOffsets("g", []TopicPartition{{"t", 1}}, func(error) {})
			commitG(t, c, now, "h", "", -1, off("u", 1, 1))
			check("offset deleted")
			if err := c.Delete("h"); err != nil {
				t.Fatal(err)
			}
			commitG(t, c, now, "g", a, gen, off("t", 0, 99))
			check("group deleted")
			jb := joinG(c, now, "g", "", "")
			ja := joinG(c, now, "g", a, "")
			b, gen2 := jb.res.MemberID, ja.res.Generation
			syncG(c, now, "g", b, gen2, nil)
			syncG(c, now, "g", a, gen2, map[string][]byte{a: []byte("p0"), b: []byte("p1")})
			commitG(t, c, now, "g", b, gen2, off("t", 2, 50))
			check("second generation")
			if n := len(completeBegins(flat(log))); n < 2 {
				t.Fatalf("%d complete checkpoints in the log, want at least 2", n)
			}
		})
	}
}

// TestIncompleteCheckpointChangesNothing: a checkpoint without its end,
// or whose end does not match its begin, leaves the state as it was,
// and the records after it (a new coordinator's, past its load marker)
// apply.
func TestIncompleteCheckpointChangesNothing(t *testing.T) {
	log := &memLog{}
	c := NewLogged(noDelay, log)
	now := t0
	j := joinG(c, now, "g", "", "")
	syncG(c, now, "g", j.res.MemberID, j.res.Generation, map[string][]byte{j.res.MemberID: []byte("all")})
	commitG(t, c, now, "g", j.res.MemberID, j.res.Generation, off("t", 0, 10), off("t", 1, 11))
	base, want := flat(log), view(c)
	bogus := Record{Key: OffsetKey("g", TopicPartition{"t", 0}), Value: encodeOffset(off("t", 0, 1))}
	for _, tc := range []struct {
		name string
		tail []Record
	}{
		{"begin only", []Record{CheckpointBegin(9)}},
		{"begin and records, no end", []Record{CheckpointBegin(9), bogus}},
		{"end with another id", []Record{CheckpointBegin(9), bogus, CheckpointEnd(8, 1)}},
		{"end with another count", []Record{CheckpointBegin(9), bogus, CheckpointEnd(9, 2)}},
		{"cut by a load marker", []Record{CheckpointBegin(9), bogus, LoadMarker(), CheckpointEnd(9, 1)}},
		{"cut by another begin", []Record{CheckpointBegin(9), bogus, CheckpointBegin(10), CheckpointEnd(9, 1)}},
		{"end without begin", []Record{CheckpointEnd(9, 0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			all := append(append([]Record(nil), base...), tc.tail...)
			if got := view(replayed(t, [][]Record{all})); !reflect.DeepEqual(got, want) {
				t.Fatalf("got %+v\nwant %+v", got, want)
			}
			if tr := completeBegins(all); len(tr) != 0 {
				t.Fatalf("the tracker found complete checkpoints at %v", tr)
			}
			// A record after the incomplete checkpoint applies.
			all = append(all, LoadMarker(), Record{Key: OffsetKey("g", TopicPartition{"t", 1}), Value: encodeOffset(off("t", 1, 12))})
			got := replayed(t, [][]Record{all}).Offsets("g", []TopicPartition{{"t", 0}, {"t", 1}})
			if got[0].Offset != 10 || got[1].Offset != 12 {
				t.Fatalf("offsets after the incomplete checkpoint: %+v", got)
			}
		})
	}
	// The complete one resets: an offset below it that it does not hold
	// is gone.
	all := append(append([]Record(nil), base...), CheckpointBegin(9), bogus, CheckpointEnd(9, 1))
	got := replayed(t, [][]Record{all}).Offsets("g", nil)
	if len(got) != 1 || got[0].Offset != 1 {
		t.Fatalf("after a complete checkpoint: %+v, want only t/0 at 1", got)
	}
}

// TestCheckpointWriterGuards: a coordinator writes no checkpoint before
// Loaded nor after Reset (its state then is not the log's: an empty
// checkpoint would erase every group), and none while an Append is in
// flight (records below it would not be in it).
func TestCheckpointWriterGuards(t *testing.T) {
	cfg := noDelay
	cfg.CheckpointRecords, cfg.CheckpointBytes = 1, 0
	hasBegin := func(l *memLog) bool {
		for _, r := range flat(l) {
			if string(r.Key) == checkpointBeginKey {
				return true
			}
		}
		return false
	}
	log := &memLog{}
	c := NewLogged(cfg, log)
	for i := 0; i < 5; i++ {
		commitG(t, c, t0, "g", "", -1, off("t", 0, int64(i)))
	}
	if hasBegin(log) {
		t.Fatal("a checkpoint before Loaded")
	}
	c.Loaded()
	commitG(t, c, t0, "g", "", -1, off("t", 0, 5))
	commitG(t, c, t0, "g", "", -1, off("t", 0, 6))
	if !hasBegin(log) {
		t.Fatal("no checkpoint after Loaded")
	}
	c.Reset()
	log.batches = nil
	for i := 0; i < 3; i++ {
		c.Commit(t0, "g", "", -1, []Offset{off("t", 0, int64(10+i))}, func(error) {})
	}
	if hasBegin(log) {
		t.Fatal("a checkpoint after Reset")
	}
	// In flight: the checkpoint waits until the held Append is answered,
	// then holds its offset.
	log2 := &memLog{hold: true}
	c2 := NewLogged(cfg, log2)
	c2.Loaded()
	c2.Commit(t0, "g", "", -1, []Offset{off("t", 0, 1)}, func(error) {})
	c2.Commit(t0, "g", "", -1, []Offset{off("t", 0, 2)}, func(error) {})
	if hasBegin(log2) {
		t.Fatal("a checkpoint while an Append was in flight")
	}
	log2.release(nil)
	log2.release(nil)
	all := flat(log2)
	got := replayed(t, [][]Record{all}).Offsets("g", nil)
	if len(got) != 1 || got[0].Offset != 2 || !hasBegin(log2) {
		t.Fatalf("log %d records, checkpoint %v, replayed %+v", len(all), hasBegin(log2), got)
	}
}

// TestCheckpointTracker: the tracker's answer for marker sequences.
func TestCheckpointTracker(t *testing.T) {
	rec := Record{Key: []byte("offset/g/t/0"), Value: []byte{1}}
	for _, tc := range []struct {
		name string
		log  []Record
		want int64
	}{
		{"empty", nil, -1},
		{"no checkpoint", []Record{rec, rec}, -1},
		{"one complete", []Record{rec, CheckpointBegin(1), rec, CheckpointEnd(1, 1), rec}, 1},
		{"empty state", []Record{rec, CheckpointBegin(1), CheckpointEnd(1, 0)}, 1},
		{"second incomplete keeps the first", []Record{CheckpointBegin(1), rec, CheckpointEnd(1, 1), rec, CheckpointBegin(2), rec}, 0},
		{"second complete", []Record{CheckpointBegin(1), rec, CheckpointEnd(1, 1), rec, CheckpointBegin(2), rec, CheckpointEnd(2, 1)}, 4},
		{"wrong count", []Record{CheckpointBegin(1), rec, CheckpointEnd(1, 2)}, -1},
		{"load inside", []Record{CheckpointBegin(1), LoadMarker(), CheckpointEnd(1, 0)}, -1},
		{"corrupt begin", []Record{{Key: []byte(checkpointBeginKey), Value: []byte{1, 2}}, CheckpointEnd(0, 0)}, -1},
	} {
		tr := NewCheckpointTracker()
		for i, r := range tc.log {
			tr.Observe(int64(i), r.Key, r.Value)
		}
		if got := tr.Complete(); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

// TestCheckpointOfALargeState: a state above one Append's bound goes as
// several Appends, in order, and a commit made while they are written
// lands after the end marker, never between the markers.
func TestCheckpointOfALargeState(t *testing.T) {
	cfg := noDelay
	cfg.CheckpointRecords, cfg.CheckpointBytes = 3000, 0 // due at the first commit after the 3,000 offsets
	log := &memLog{}
	c := NewLogged(cfg, log)
	c.Loaded()
	big := func(p int32, o int64) Offset {
		x := off("t", p, o)
		x.Metadata = string(make([]byte, 1000))
		return x
	}
	for i := int32(0); i < 3000; i += 100 {
		offs := make([]Offset, 100)
		for j := range offs {
			offs[j] = big(i+int32(j), 1)
		}
		commitG(t, c, t0, "g", "", -1, offs...)
	}
	log.hold = true
	c.Commit(t0, "g", "", -1, []Offset{big(0, 2)}, func(error) {}) // due: the checkpoint goes first
	c.Commit(t0, "g", "", -1, []Offset{big(1, 2)}, func(error) {})
	for len(log.held) > 0 {
		log.release(nil)
	}
	all := flat(log)
	begins := completeBegins(all)
	if len(begins) == 0 {
		t.Fatal("no complete checkpoint")
	}
	if len(begins) != 1 {
		t.Fatalf("complete checkpoints at %v, want one", begins)
	}
	b := begins[0]
	chunks := 0
	for i, n := 0, 0; i < len(log.batches); i++ {
		if n >= b && n < b+3002 {
			chunks++
			if sz := (appendCall{recs: log.batches[i]}).bytes(); sz > checkpointChunkBytesMax {
				t.Errorf("a checkpoint Append of %d bytes", sz)
			}
		}
		n += len(log.batches[i])
	}
	if chunks < 3 {
		t.Errorf("a checkpoint of about 3 MB went as %d Appends", chunks)
	}
	if got, want := string(all[b+3001].Key), checkpointEndKey; got != want {
		t.Fatalf("record %d after the begin is %q, want the end marker", 3001, got)
	}
	if tail := all[b+3002:]; len(tail) != 2 {
		t.Fatalf("%d records after the end marker, want the 2 commits made meanwhile", len(tail))
	}
	if got, want := view(replayed(t, [][]Record{all[b:]})), view(c); !reflect.DeepEqual(got, want) {
		t.Fatal("the log from the checkpoint does not replay to the live state")
	}
	if o := c.Offsets("g", []TopicPartition{{"t", 0}, {"t", 1}}); o[0].Offset != 2 || o[1].Offset != 2 {
		t.Fatalf("the commits made during the checkpoint: %+v", o)
	}
}
