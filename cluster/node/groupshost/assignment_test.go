package groupshost

import (
	"reflect"
	"testing"

	"github.com/corestream/corestream/cluster/httpapi"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A member's assignment in the consumer protocol reads as its topics in
// name order, each with its partitions ascending; bytes that are not
// one read as no partitions.
func TestConsumerAssignment(t *testing.T) {
	a := kmsg.NewConsumerMemberAssignment()
	a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "zeta", Partitions: []int32{4, 0, 2}}, {Topic: "alpha", Partitions: []int32{1}}}
	valid := a.AppendTo(nil)
	for _, tc := range []struct {
		name string
		b    []byte
		want []httpapi.GroupAssignedTopic
	}{
		{"valid", valid, []httpapi.GroupAssignedTopic{{Topic: "alpha", Partitions: []int32{1}}, {Topic: "zeta", Partitions: []int32{0, 2, 4}}}},
		{"empty", nil, []httpapi.GroupAssignedTopic{}},
		{"truncated", valid[:len(valid)-9], []httpapi.GroupAssignedTopic{}},
		{"garbage", []byte{0, 0, 0x7f, 0xff, 0xff, 0xff}, []httpapi.GroupAssignedTopic{}},
	} {
		if got := consumerAssignment(tc.b); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
