package node

import (
	"fmt"
	"strings"
	"testing"

	"github.com/corestream/corestream/shard/partition"
	"golang.org/x/sys/unix"
)

// An open failure's kind is what an operator acts on: a fenced replica
// (its group lost committed entries) says so and what to do.
func TestOpenErrorKind(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("open: %w", unix.EMFILE), "too many open files"},
		{fmt.Errorf("write: %w", unix.ENOSPC), "no space left"},
		{fmt.Errorf("%w: partition t/0 on node 2: …", partition.ErrFenced), "fenced: its group lost committed entries; remove the replica's directory"},
		{fmt.Errorf("something else"), "open failed"},
	} {
		if got := openErrorKind(tc.err); !strings.Contains(got, tc.want) {
			t.Errorf("openErrorKind(%v) = %q, want it to say %q", tc.err, got, tc.want)
		}
	}
}
