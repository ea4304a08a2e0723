package node

import (
	"errors"
	"testing"

	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/shard/partition"
)

// Every kind of replica error has exactly one native code, and the
// conversion keeps the message, the retry advice and the hint.
func TestReplicaCodesCoverEveryKind(t *testing.T) {
	seen := map[error]bool{}
	for _, c := range replicaCodes {
		if seen[c.kind] {
			t.Errorf("%v is mapped twice", c.kind)
		}
		seen[c.kind] = true
		if c.code == nil || c.code == wire.ErrUnknownServerError {
			t.Errorf("%v maps to no precise code", c.kind)
		}
	}
	for _, k := range partition.ErrorKinds() {
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
	other := errors.New("not a replica's")
	if wireError(other) != other {
		t.Fatal("other errors pass through")
	}
}
