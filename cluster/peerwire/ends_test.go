package peerwire

import (
	"bytes"
	"reflect"
	"testing"
)

// An Ends question and its answer decode to what was encoded, and a
// frame short, long, over the bound or of another kind is refused.
func TestEndsFrames(t *testing.T) {
	q := Ends{ID: 1 << 40, Parts: []EndKey{{TopicID: [16]byte{1, 2}, Partition: 7}, {TopicID: [16]byte{9}, Partition: 0}}}
	b := AppendEnds(nil, q)
	if got, err := DecodeEnds(b); err != nil || !reflect.DeepEqual(got, q) {
		t.Fatalf("ends %+v, %v; want %+v", got, err, q)
	}
	a := EndsAnswer{ID: 1 << 40, HW: []int64{12, -1}}
	ab := AppendEndsAnswer(nil, a)
	if got, err := DecodeEndsAnswer(ab); err != nil || !reflect.DeepEqual(got, a) {
		t.Fatalf("answer %+v, %v; want %+v", got, err, a)
	}
	empty := Ends{ID: 3, Parts: []EndKey{}}
	if got, err := DecodeEnds(AppendEnds(nil, empty)); err != nil || !reflect.DeepEqual(got, empty) {
		t.Fatalf("an empty question: %+v, %v", got, err)
	}
	over := AppendEnds(nil, Ends{Parts: make([]EndKey, EndsPerFrameMax+1)})
	for name, bad := range map[string][]byte{
		"short":        b[:len(b)-1],
		"long":         append(bytes.Clone(b), 0),
		"over the max": over,
		"other kind":   AppendPing(nil, Ping{Node: 1}),
		"empty":        {},
	} {
		if _, err := DecodeEnds(bad); err == nil {
			t.Errorf("%s: an Ends frame decoded", name)
		}
	}
	below := AppendEndsAnswer(nil, EndsAnswer{HW: []int64{-2}})
	for name, bad := range map[string][]byte{
		"short": ab[:len(ab)-1], "long": append(bytes.Clone(ab), 0), "below -1": below, "other kind": b,
	} {
		if _, err := DecodeEndsAnswer(bad); err == nil {
			t.Errorf("%s: an EndsAnswer frame decoded", name)
		}
	}
}

func FuzzDecodeEnds(f *testing.F) {
	f.Add(AppendEnds(nil, Ends{ID: 1, Parts: []EndKey{{Partition: 1}}}))
	f.Add(AppendEndsAnswer(nil, EndsAnswer{ID: 1, HW: []int64{5, -1}}))
	f.Add([]byte{})
	f.Add(AppendEnds(nil, Ends{Parts: make([]EndKey, EndsPerFrameMax)}))
	f.Add(append(AppendEnds(nil, Ends{ID: 2, Parts: []EndKey{{Partition: 3}}}), 0xff, 0xff))
	f.Fuzz(func(t *testing.T, b []byte) {
		if q, err := DecodeEnds(b); err == nil && !bytes.Equal(AppendEnds(nil, q), b) {
			t.Fatal("ends: decode/encode differs")
		}
		if a, err := DecodeEndsAnswer(b); err == nil && !bytes.Equal(AppendEndsAnswer(nil, a), b) {
			t.Fatal("ends answer: decode/encode differs")
		}
	})
}
