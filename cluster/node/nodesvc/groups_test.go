package nodesvc

import (
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/cluster/groups"
	"github.com/corestream/corestream/cluster/service"
)

// Every coordinator error reaches the front ends as a group kind of the
// service, message kept, never as ErrInternal.
func TestGroupErrKinds(t *testing.T) {
	s := &Service{}
	for _, g := range groupKinds {
		err := s.groupErr(errors.Join(g.is, errors.New("detail")))
		var se *service.Error
		if !errors.As(err, &se) || se.Kind != g.kind || se.Kind == service.ErrInternal {
			t.Errorf("%v became %#v, want kind %v", g.is, err, g.kind)
		}
	}
	for _, is := range []error{groups.ErrUnknownMember, groups.ErrIllegalGeneration, groups.ErrRebalanceInProgress,
		groups.ErrMemberIDRequired, groups.ErrInconsistentProtocol, groups.ErrInvalidSessionTimeout, groups.ErrUnknownGroup,
		groups.ErrNonEmptyGroup, groups.ErrGroupFull, groups.ErrTooManyGroups, groups.ErrFencedInstance} {
		if errors.Is(s.groupErr(is), service.ErrInternal) {
			t.Errorf("%v has no service kind", is)
		}
	}
}

// The subscription decoder reads every version of Kafka's consumer
// protocol that clients send, and refuses what does not parse.
func TestSubscriptionTopics(t *testing.T) {
	for v := int16(0); v <= 3; v++ {
		m := kmsg.NewConsumerMemberMetadata()
		m.Version, m.Topics, m.UserData = v, []string{"a", "bb"}, []byte("x")
		if got := subscriptionTopics(m.AppendTo(nil)); !reflect.DeepEqual(got, []string{"a", "bb"}) {
			t.Errorf("v%d: %v", v, got)
		}
	}
	for _, bad := range [][]byte{nil, {0}, {0, 0, 0, 0, 0, 2, 0, 1, 'a'}, {0, 0, 0x7f, 0xff, 0xff, 0xff}, {0, 0, 0, 0, 0, 1, 0xff, 0xff}} {
		if got := subscriptionTopics(bad); got != nil {
			t.Errorf("%v parsed as %v", bad, got)
		}
	}
}
