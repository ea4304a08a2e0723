package node

import (
	"sync"
	"time"

	"github.com/corestream/corestream/cluster/groups"
)

// groupsTick is how often the coordinator expires sessions and ends
// rebalances that ran out of time: a member is removed at most this late
// past its session timeout.
const groupsTick = 100 * time.Millisecond

// groupsRunner is the node's consumer group coordinator and the
// goroutine that ticks it (the coordinator reads no clock of its own).
type groupsRunner struct {
	coord *groups.Coordinator
	done  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

// startGroups starts the coordinator's ticks.
func startGroups() *groupsRunner {
	r := &groupsRunner{coord: groups.New(groups.DefaultConfig), done: make(chan struct{})}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		t := time.NewTicker(groupsTick)
		defer t.Stop()
		for {
			select {
			case <-r.done:
				return
			case now := <-t.C:
				r.coord.Tick(now)
			}
		}
	}()
	return r
}

// stop ends the ticks and answers parked group calls (their connections
// are closing); a nil runner (no Kafka listener) has nothing to stop.
func (r *groupsRunner) stop() {
	if r == nil {
		return
	}
	r.once.Do(func() {
		close(r.done)
		r.wg.Wait()
		r.coord.Reset()
	})
}
