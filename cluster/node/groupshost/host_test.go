package groupshost

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/corestream/corestream/cluster/groups"
	"github.com/corestream/corestream/segment"
)

// groupsPartitionOf spreads names evenly and never changes (a group
// moved to another partition would lose its state).
func TestGroupsPartitionOf(t *testing.T) {
	for _, tc := range []struct {
		group string
		n     int
		want  int32
	}{
		// FNV-1a 32: frozen values.
		{"g", 16, int32(0xe20c2606 % 16)},
		{"orders", 16, int32(0x325e96ec % 16)},
		{"x", 1, 0},
	} {
		if got := groupsPartitionOf(tc.group, tc.n); got != tc.want {
			t.Errorf("%q mod %d: %d, want %d", tc.group, tc.n, got, tc.want)
		}
	}
	count := make([]int, 16)
	for i := 0; i < 16000; i++ {
		count[groupsPartitionOf(fmt.Sprintf("group-%d", i), 16)]++
	}
	for p, c := range count {
		if c < 800 || c > 1200 {
			t.Errorf("partition %d holds %d of 16000 groups", p, c)
		}
	}
}

// A coordinator's batches read back as its records, from the offset
// asked: records below it, control batches (the consensus layer's) and
// a batch cut off at the end of the answer are left out.
func TestGroupsRecordsFromBatches(t *testing.T) {
	recs := []groups.Record{{Key: []byte("group/a"), Value: []byte{1, 2}}, {Key: []byte("offset/a/t/0")}, groups.LoadMarker()}
	b1, err := groupsBatch(recs, time.Now().UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	b2, err := groupsBatch(recs[:1], time.Now().UnixMilli())
	if err != nil {
		t.Fatal(err)
	}
	// Offsets: b1 holds 10..12, a control batch 13, b2 14.
	setBase := func(b []byte, base int64) []byte {
		b = append([]byte(nil), b...)
		binary.BigEndian.PutUint64(b, uint64(base))
		return b
	}
	var buf []byte
	buf = append(buf, setBase(b1, 10)...)
	buf = append(buf, setBase(segment.MarkerBatchWide([]byte("conf"), 0), 13)...)
	whole := append(append([]byte(nil), buf...), setBase(b2, 14)...)
	for _, tc := range []struct {
		name  string
		buf   []byte
		from  int64
		keys  []string
		tombs int
		next  int64
	}{
		{"all", whole, 10, []string{"group/a", "offset/a/t/0", "load", "group/a"}, 1, 15},
		{"from the middle of a batch", whole, 11, []string{"offset/a/t/0", "load", "group/a"}, 1, 15},
		{"a batch cut off", whole[:len(whole)-5], 10, []string{"group/a", "offset/a/t/0", "load"}, 1, 14},
		{"nothing", nil, 7, nil, 0, 7},
	} {
		got, next, err := groupsRecords(tc.buf, tc.from)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var keys []string
		tombs := 0
		for _, r := range got {
			keys = append(keys, string(r.Key))
			if r.IsTombstone() {
				tombs++
			}
		}
		if fmt.Sprint(keys) != fmt.Sprint(tc.keys) || tombs != tc.tombs || next != tc.next {
			t.Errorf("%s: keys %v (%d tombstones), next %d; want %v (%d), %d", tc.name, keys, tombs, next, tc.keys, tc.tombs, tc.next)
		}
	}
	if _, _, err := groupsRecords([]byte{0, 1, 2, 3, 4, 5, 6, 7, 0, 0, 0, 1, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9}, 0); err == nil {
		t.Error("a corrupt batch read without an error")
	}
}
