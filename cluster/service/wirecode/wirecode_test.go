package wirecode

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
func TestCodesCoverEveryKind(t *testing.T) {
	seen := map[error]bool{}
	for _, c := range codes {
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
			t.Errorf("%v has no native code in codes", k)
		}
	}
	pe := &partition.Error{Kind: partition.ErrNotPrimary, Message: "node 2 is not the primary of t/0", Leader: 3, Generation: 7, RetryAfterMs: 5}
	var er *wire.ErrorResponse
	if err := Error(pe); !errors.As(err, &er) || er.Err != wire.ErrNotPrimary || er.Message != pe.Message ||
		er.RetryAfterMs != 5 || er.Hint == nil || er.Hint.NodeID != 3 || er.Hint.Generation != 7 {
		t.Fatalf("converted: %#v", err)
	}
	if err := Error(&partition.Error{Kind: partition.ErrStorage, Message: "x"}); !errors.As(err, &er) || er.Hint != nil {
		t.Fatalf("no leader means no hint: %#v", err)
	}
	se := &service.Error{Kind: service.ErrNotMetadataPrimary, Message: "node 1 is not the metadata primary", RetryAfterMs: 2,
		Hint: &service.Hint{NodeID: 2, Generation: 4, ClientAddr: "10.0.0.2:7070"}}
	if err := Error(se); !errors.As(err, &er) || er.Err != wire.ErrNotMetadataPrimary || er.Message != se.Message ||
		er.RetryAfterMs != 2 || er.Hint == nil || *er.Hint != (wire.Hint{NodeID: 2, Generation: 4, Address: "10.0.0.2:7070"}) {
		t.Fatalf("converted: %#v", err)
	}
	other := errors.New("not a replica's")
	if Error(other) != other {
		t.Fatal("other errors pass through")
	}
}
