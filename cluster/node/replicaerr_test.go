package node

import (
	"errors"
	"testing"

	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/shard/partition"
)

// Every kind of error the service answers with (its own and the
// replica's) has exactly one native code, and the conversion keeps the
// message, the retry advice and the hint.
func TestReplicaCodesCoverEveryKind(t *testing.T) {
	seen := map[error]bool{}
	for _, c := range replicaCodes {
		if seen[c.kind] {
			t.Errorf("%v is mapped twice", c.kind)
		}
		seen[c.kind] = true
		if c.code == nil || (c.code == wire.ErrUnknownServerError) != (c.kind == service.ErrInternal) {
			t.Errorf("%v maps to no precise code", c.kind)
		}
	}
	for _, k := range service.ErrorKinds() {
		if !seen[k] {
			t.Errorf("%v has no native code in replicaCodes", k)
		}
	}
	pe := &partition.Error{Kind: partition.ErrNotPrimary, Message: "node 2 is not the primary of t/0", Leader: 3, Generation: 7, RetryAfterMs: 5}
	var er *wire.ErrorResponse
	if err := wireError(pe); !errors.As(err, &er) || er.Err != wire.ErrNotPrimary || er.Message != pe.Message ||
		er.RetryAfterMs != 5 || er.Hint == nil || er.Hint.NodeID != 3 || er.Hint.Generation != 7 {
		t.Fatalf("converted: %#v", err)
	}
	if err := wireError(&partition.Error{Kind: partition.ErrStorage, Message: "x"}); !errors.As(err, &er) || er.Hint != nil {
		t.Fatalf("no leader means no hint: %#v", err)
	}
	se := &service.Error{Kind: service.ErrNotMetadataPrimary, Message: "node 1 is not the metadata primary", RetryAfterMs: 2,
		Hint: &service.Hint{NodeID: 2, Generation: 4, ClientAddr: "10.0.0.2:7070"}}
	if err := wireError(se); !errors.As(err, &er) || er.Err != wire.ErrNotMetadataPrimary || er.Message != se.Message ||
		er.RetryAfterMs != 2 || er.Hint == nil || *er.Hint != (wire.Hint{NodeID: 2, Generation: 4, Address: "10.0.0.2:7070"}) {
		t.Fatalf("converted: %#v", err)
	}
	other := errors.New("not a replica's")
	if wireError(other) != other {
		t.Fatal("other errors pass through")
	}
}

// An answer a part still gives in native codes becomes the service's
// kind and back to the same code, so a front end sees what the part
// meant; where two kinds share a code the service's own is read.
func TestNativeCodesRoundTripThroughKinds(t *testing.T) {
	s := &nodeService{svcDeps{addrOf: func(id int32) string { return map[int32]string{2: "10.0.0.2:7070"}[id] }}}
	for _, c := range replicaCodes {
		in := wire.Errorf(c.code, "because")
		in.Hint = &wire.Hint{NodeID: 2, Generation: 9}
		err := s.svcErr(in)
		var se *service.Error
		if !errors.As(err, &se) || se.Message != "because" || se.Hint == nil || se.Hint.ClientAddr != "10.0.0.2:7070" {
			t.Fatalf("%s: %#v", c.code.Name, err)
		}
		var er *wire.ErrorResponse
		if !errors.As(wireError(err), &er) || er.Err != c.code {
			t.Fatalf("%s came back as %v", c.code.Name, wireError(err))
		}
	}
	if k := kindOfCode(wire.ErrInvalidRequest); k != service.ErrInvalidRequest {
		t.Fatalf("INVALID_REQUEST reads as %v", k)
	}
	if err := s.svcErr(errors.New("boom")); !errors.Is(err, service.ErrInternal) || err.Error() != "boom" {
		t.Fatalf("a plain error: %#v", err)
	}
}
