package node

import (
	"testing"
	"time"

	"github.com/corestream/corestream/cluster/transport"
	"github.com/corestream/corestream/shard"
)

// linkState reads node n's outbound link to peer (link 0) on its shard.
// It asserts the node's transport back to the TCP one: this is a test of
// the TCP links themselves, which need whole nodes to run.
func linkState(t *testing.T, n *Node, peer int32) (ready bool, timer *shard.Timer, backoff time.Duration) {
	t.Helper()
	p := n.peers.(*transport.TCP)
	ready, timer, backoff, err := p.LinkState(peer, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ready, timer, backoff
}

// A node whose link to a dead peer waits out a long redial backoff dials
// at once when that peer dials in after its restart: the link is up before
// the pending redial would have fired. Before, it stayed down for the rest
// of the backoff (up to transport.RedialMax), and a factor-2 partition led here
// stalled that long after its follower's node returned (fault harness).
func TestPeerLinkRedialsWhenPeerDialsIn(t *testing.T) {
	tc := startCluster(t, 3, nil)
	tc.waitLoaded()
	tc.stopNode(2)
	a := tc.nodes[0]
	// Node 1 learns of the stop when the link's connection closes, a
	// moment after stopNode returns.
	clusterWait(t, 30*time.Second, "node 1's link to the stopped node 3 to go down", func() bool {
		ready, _, _ := linkState(t, a, 3)
		return !ready
	})

	// Wait for a redial armed with a long wait: a new timer while the
	// backoff is at its ceiling waits transport.RedialMax.
	var armed time.Time
	var last *shard.Timer
	clusterWait(t, 60*time.Second, "node 1's link to node 3 to back off to its ceiling", func() bool {
		ready, timer, backoff := linkState(t, a, 3)
		if ready {
			t.Fatal("node 1's link to the stopped node 3 is up")
		}
		fresh := timer != nil && timer != last
		if last != nil && fresh && backoff == transport.RedialMax {
			armed = time.Now()
			return true
		}
		if fresh {
			last = timer
		}
		return false
	})
	// A timer armed when the backoff reached its ceiling waits the last
	// doubling, at least transport.RedialMax*4/5. It was armed up to one poll before
	// 'armed': take 200 ms off for that.
	fires := armed.Add(transport.RedialMax*4/5 - 200*time.Millisecond)
	tc.startNode(2)
	if time.Now().After(fires) {
		t.Skipf("node 3 took until after the pending redial to start (%v); nothing to tell apart", time.Since(armed))
	}
	clusterWait(t, 30*time.Second, "node 1's link to node 3 up", func() bool {
		ready, _, _ := linkState(t, a, 3)
		return ready
	})
	if up := time.Now(); up.After(fires) {
		t.Fatalf("the link came up %v after the redial was armed: it waited for the backoff", up.Sub(armed))
	}
}
