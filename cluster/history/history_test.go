package history

import (
	"fmt"
	"testing"
)

// The ring keeps the newest Cap samples, oldest first, whatever number
// was added.
func TestRingKeepsNewest(t *testing.T) {
	for _, tc := range []struct{ capacity, added int }{
		{1, 0}, {1, 1}, {1, 5}, {3, 2}, {3, 3}, {3, 4}, {3, 10}, {180, 1000},
	} {
		t.Run(fmt.Sprintf("cap%d_added%d", tc.capacity, tc.added), func(t *testing.T) {
			r := NewRing(tc.capacity)
			for i := range tc.added {
				r.Add(Sample{TimeMs: int64(i)})
			}
			got := r.Samples()
			want := min(tc.added, tc.capacity)
			if len(got) != want {
				t.Fatalf("%d samples, want %d", len(got), want)
			}
			for i, s := range got {
				if w := int64(tc.added - want + i); s.TimeMs != w {
					t.Fatalf("sample %d is time %d, want %d (%v)", i, s.TimeMs, w, got)
				}
			}
		})
	}
}

// A capacity out of bounds is clamped; a sample's groups are bounded.
func TestRingBounds(t *testing.T) {
	if c := NewRing(0).Cap(); c != 1 {
		t.Errorf("NewRing(0) has capacity %d, want 1", c)
	}
	if c := NewRing(1 << 30).Cap(); c != SamplesMaxLimit {
		t.Errorf("NewRing(1<<30) has capacity %d, want %d", c, SamplesMaxLimit)
	}
	r := NewRing(2)
	groups := make([]GroupLag, GroupsPerSampleMax+5)
	r.Add(Sample{Groups: groups, GroupsOmitted: 1})
	s := r.Samples()[0]
	if len(s.Groups) != GroupsPerSampleMax || s.GroupsOmitted != 6 {
		t.Errorf("a sample of %d groups (1 omitted) holds %d, %d omitted; want %d, 6", len(groups), len(s.Groups), s.GroupsOmitted, GroupsPerSampleMax)
	}
	r.Add(Sample{GroupPartitions: make([]GroupPartitionLag, GroupPartitionsPerSampleMax+3), Topics: make([]TopicRecords, TopicsPerSampleMax+2)})
	s = r.Samples()[1]
	if len(s.GroupPartitions) != GroupPartitionsPerSampleMax || s.GroupPartitionsOmitted != 3 ||
		len(s.Topics) != TopicsPerSampleMax || s.TopicsOmitted != 2 {
		t.Errorf("a sample holds %d group partitions (%d omitted) and %d topics (%d omitted); want %d (3), %d (2)",
			len(s.GroupPartitions), s.GroupPartitionsOmitted, len(s.Topics), s.TopicsOmitted, GroupPartitionsPerSampleMax, TopicsPerSampleMax)
	}
}
