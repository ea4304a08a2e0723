package service

import (
	"errors"
	"testing"

	"github.com/corestream/corestream/shard/partition"
)

// TestErrorKindsDistinct: a front end's table maps each kind to one code,
// so no kind may be listed twice or be nil.
func TestErrorKindsDistinct(t *testing.T) {
	seen := map[error]bool{}
	for _, k := range ErrorKinds() {
		if k == nil || seen[k] {
			t.Fatalf("kind %v is nil or listed twice", k)
		}
		seen[k] = true
	}
	for _, k := range append(serviceKinds, partition.ErrorKinds()...) {
		if !seen[k] {
			t.Fatalf("ErrorKinds leaves out %v", k)
		}
	}
}

// TestErrorUnwrapsToKind: callers test an answer with errors.Is.
func TestErrorUnwrapsToKind(t *testing.T) {
	for _, k := range ErrorKinds() {
		var err error = Errorf(k, "because")
		if !errors.Is(err, k) || err.Error() != "because" {
			t.Fatalf("Errorf(%v): Is=%v, text %q", k, errors.Is(err, k), err.Error())
		}
	}
}
