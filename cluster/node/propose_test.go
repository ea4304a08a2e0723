package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/corestream/corestream/cluster/metadata"
)

// TestProposeFromDoneIsAnswered proposes a chain of metadata commands,
// each from inside the previous one's done callback, and wants every one
// answered with its own result well before its timeout. The metadata
// replica once lost a produce made from inside its own produce callback:
// the command committed and applied, but its proposer heard nothing until
// the timeout.
func TestProposeFromDoneIsAnswered(t *testing.T) {
	n := runNode(t, t.TempDir(), nil)
	const depth = 4
	// The timeout is long enough for a loaded machine and shorter than the
	// wait below, so a lost answer shows as a timed-out proposal.
	const timeout = 20 * time.Second
	type answer struct {
		i   int
		err error
	}
	answers := make(chan answer, depth)
	var chain func(c *controller, i int)
	chain = func(c *controller, i int) {
		if i == depth {
			return
		}
		roster, eligible := c.rosterIDs()
		cmd, err := c.State().PlanCreateTopic(metadata.CreateRequest{Name: fmt.Sprintf("nested-%d", i), Partitions: 1, ReplicationFactor: 1},
			roster, eligible, 1, time.Now().UnixMilli())
		if err != nil {
			answers <- answer{i, err}
			return
		}
		c.propose(cmd, timeout, func(_ metadata.Result, err error) {
			answers <- answer{i, err}
			if err == nil {
				chain(c, i+1) // from inside this proposal's callback
			}
		})
	}
	if err := n.group.Shard(metaShard).Post(func() { chain(n.ctrl, 0) }); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(timeout + 10*time.Second)
	for want := 0; want < depth; want++ {
		select {
		case a := <-answers:
			if a.i != want || a.err != nil {
				t.Fatalf("proposal %d answered with %v; want proposal %d answered with no error", a.i, a.err, want)
			}
		case <-deadline:
			t.Fatalf("proposal %d (made from inside proposal %d's callback) was never answered", want, want-1)
		}
	}
	for i := 0; i < depth; i++ {
		if n.view.Load().Topics[fmt.Sprintf("nested-%d", i)] == nil {
			t.Errorf("topic nested-%d is not in the view", i)
		}
	}
}
