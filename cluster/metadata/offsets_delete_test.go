package metadata

import "testing"

// A delete drops the keys named (one not committed is no error), or
// every offset of the consumer when it names none, and leaves other
// consumers alone.
func TestDeleteOffsets(t *testing.T) {
	s := New()
	apply(t, s, mustPlanCreate(t, s, "t", 3, 1))
	for _, consumer := range []string{"g", "other"} {
		c := Command{Version: 1, Op: OpCommitOffsets, Consumer: consumer, Offsets: []OffsetEntry{
			{OffsetKey{"t", 0}, Committed{Offset: 1}}, {OffsetKey{"t", 1}, Committed{Offset: 2}}, {OffsetKey{"t", 2}, Committed{Offset: 3}}}}
		if _, err := apply(t, s, c); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := apply(t, s, Command{Version: 1, Op: OpDeleteOffsets, Consumer: "g",
		Offsets: []OffsetEntry{{OffsetKey: OffsetKey{"t", 1}}, {OffsetKey: OffsetKey{"gone", 0}}}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Committed("g", OffsetKey{"t", 1}); ok || len(s.CommittedAll("g")) != 2 {
		t.Fatalf("after deleting t/1: %+v", s.CommittedAll("g"))
	}
	if _, err := apply(t, s, Command{Version: 1, Op: OpDeleteOffsets, Consumer: "g"}); err != nil {
		t.Fatal(err)
	}
	if len(s.CommittedAll("g")) != 0 || len(s.CommittedAll("other")) != 3 {
		t.Fatalf("after deleting every offset of g: g %v, other %v", s.CommittedAll("g"), s.CommittedAll("other"))
	}
	if _, err := apply(t, s, Command{Version: 1, Op: OpDeleteOffsets}); err == nil {
		t.Fatal("a delete without a consumer was applied")
	}
}
