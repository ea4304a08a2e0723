package client

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/netio/wire"
)

func tps(topic string, ps ...int32) []wire.TopicPartition {
	var out []wire.TopicPartition
	for _, p := range ps {
		out = append(out, wire.TopicPartition{Topic: topic, Partition: p})
	}
	return out
}

func TestAssign(t *testing.T) {
	for _, tc := range []struct {
		name     string
		assignor string
		subs     map[string][]string
		parts    map[string]int32
		want     map[string][]wire.TopicPartition
	}{
		{"range: 12 over 3", AssignorRange, map[string][]string{"b": {"t"}, "a": {"t"}, "c": {"t"}}, map[string]int32{"t": 12},
			map[string][]wire.TopicPartition{"a": tps("t", 0, 1, 2, 3), "b": tps("t", 4, 5, 6, 7), "c": tps("t", 8, 9, 10, 11)}},
		{"range: the first members take the remainder", AssignorRange, map[string][]string{"a": {"t"}, "b": {"t"}}, map[string]int32{"t": 3},
			map[string][]wire.TopicPartition{"a": tps("t", 0, 1), "b": tps("t", 2)}},
		{"range: more members than partitions", AssignorRange, map[string][]string{"a": {"t"}, "b": {"t"}, "c": {"t"}}, map[string]int32{"t": 2},
			map[string][]wire.TopicPartition{"a": tps("t", 0), "b": tps("t", 1), "c": nil}},
		{"range: only subscribers of a topic", AssignorRange, map[string][]string{"a": {"t", "u"}, "b": {"u"}}, map[string]int32{"t": 2, "u": 2},
			map[string][]wire.TopicPartition{"a": append(tps("t", 0, 1), tps("u", 0)...), "b": tps("u", 1)}},
		{"range: an unknown topic is skipped", AssignorRange, map[string][]string{"a": {"gone"}}, map[string]int32{},
			map[string][]wire.TopicPartition{"a": nil}},
		{"roundrobin", AssignorRoundRobin, map[string][]string{"a": {"t", "u"}, "b": {"t", "u"}}, map[string]int32{"t": 3, "u": 1},
			map[string][]wire.TopicPartition{"a": append(tps("t", 0, 2), tps("u")...), "b": append(tps("t", 1), tps("u", 0)...)}},
	} {
		got, err := assign(tc.assignor, tc.subs, tc.parts)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	if _, err := assign("sticky", map[string][]string{"a": {"t"}}, map[string]int32{"t": 1}); err == nil {
		t.Error("an unknown assignor was accepted")
	}
}

// The layouts round-trip, and a truncated or hostile one is refused, not
// a panic.
func TestGroupBytes(t *testing.T) {
	sub := appendSubscription(nil, []string{"orders", "payments"})
	if got, err := decodeSubscription(sub); err != nil || !reflect.DeepEqual(got, []string{"orders", "payments"}) {
		t.Fatalf("subscription: %v %v", got, err)
	}
	parts := append(tps("b", 3, 1), tps("a", 0)...)
	got, err := decodeAssignment(appendAssignment(nil, parts))
	if want := append(tps("a", 0), tps("b", 1, 3)...); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("assignment: %v %v, want %v", got, err, want)
	}
	if got, err := decodeAssignment(nil); err != nil || got != nil {
		t.Fatalf("empty assignment: %v %v", got, err)
	}
	for i := 1; i < len(sub)-4; i++ {
		if _, err := decodeSubscription(sub[:i]); err == nil {
			t.Fatalf("subscription cut at %d bytes decoded", i)
		}
	}
	if _, err := decodeAssignment([]byte{0, 0, 0x7f, 0xff, 0xff, 0xff}); err == nil {
		t.Fatal("a huge count decoded")
	}
}

// Kafka clients read what the SDK writes, and the other way round: the
// two can share a group.
func TestGroupBytesAreKafkas(t *testing.T) {
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(appendAssignment(nil, tps("orders", 0, 2))); err != nil || len(a.Topics) != 1 ||
		a.Topics[0].Topic != "orders" || !reflect.DeepEqual(a.Topics[0].Partitions, []int32{0, 2}) {
		t.Fatalf("kmsg read our assignment: %+v %v", a, err)
	}
	var m kmsg.ConsumerMemberMetadata
	if err := m.ReadFrom(appendSubscription(nil, []string{"orders"})); err != nil || !reflect.DeepEqual(m.Topics, []string{"orders"}) {
		t.Fatalf("kmsg read our subscription: %+v %v", m, err)
	}
	km := kmsg.NewConsumerMemberMetadata()
	km.Version, km.Topics = 3, []string{"x", "y"}
	km.OwnedPartitions = []kmsg.ConsumerMemberMetadataOwnedPartition{{Topic: "x", Partitions: []int32{1}}}
	if got, err := decodeSubscription(km.AppendTo(nil)); err != nil || !reflect.DeepEqual(got, []string{"x", "y"}) {
		t.Fatalf("a franz-go v3 subscription: %v %v", got, err)
	}
	ka := kmsg.NewConsumerMemberAssignment()
	ka.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "x", Partitions: []int32{4, 1}}}
	if got, err := decodeAssignment(ka.AppendTo(nil)); err != nil || !reflect.DeepEqual(got, tps("x", 1, 4)) {
		t.Fatalf("a franz-go assignment: %v %v", got, err)
	}
}
