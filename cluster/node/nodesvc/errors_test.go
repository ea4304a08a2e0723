package nodesvc

import (
	"errors"
	"testing"

	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/cluster/service/wirecode"
	"github.com/corestream/corestream/netio/wire"
)

// Every kind crosses svcErr and the native table with its message and
// hint, and any other error becomes ErrInternal with its text. (That the
// node's parts answer in kinds is the node's TestPartsAnswerInKinds.)
func TestSvcErrKeepsKinds(t *testing.T) {
	s := New(Deps{AddrOf: func(id int32) string { return map[int32]string{2: "10.0.0.2:7070"}[id] }})
	for _, k := range service.ErrorKinds() {
		in := service.Errorf(k, "because")
		in.Hint = &service.Hint{NodeID: 2, Generation: 9, ClientAddr: "10.0.0.2:7070"}
		err := s.svcErr(in)
		var er *wire.ErrorResponse
		if !errors.Is(err, k) || !errors.As(wirecode.Error(err), &er) || er.Err != wirecode.CodeOf(k) || er.Message != "because" ||
			er.Hint == nil || er.Hint.Address != "10.0.0.2:7070" {
			t.Fatalf("%v came back as %v", k, wirecode.Error(err))
		}
	}
	if err := s.svcErr(errors.New("boom")); !errors.Is(err, service.ErrInternal) || err.Error() != "boom" {
		t.Fatalf("a plain error: %#v", err)
	}
}
