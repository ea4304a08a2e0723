package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/tools/localcluster/launch"
)

// Bounds of the cluster's processes.
const (
	// stopGraceMax bounds a node's graceful stop (the broker's own bound
	// is 30 s) before it is killed.
	stopGraceMax = 40 * time.Second
	// servingWaitMax bounds the wait for a (re)started node to answer on
	// its client port.
	servingWaitMax = 90 * time.Second
	// probeEvery is the pause between two readiness probes.
	probeEvery = 50 * time.Millisecond
)

// proc is one running node process.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has been waited for
	err  error         // exit status, once done is closed
}

// Cluster is the node processes of a plan. Its methods are called by one
// goroutine (the run's).
type Cluster struct {
	plan *launch.Plan
	bin  string
	// gids[i] is node i+1's group id (0: run as the harness's own group).
	gids    []uint32
	procs   []*proc
	stopped []bool // SIGSTOPped and not yet continued
	// spawn runs starts on one goroutine locked to its OS thread: the
	// nodes' parent-death signal fires when that thread exits, and it
	// exits only once Close has stopped every node, or when the harness
	// dies.
	spawn chan spawnReq
}

type spawnReq struct {
	i   int
	out chan error
}

// newCluster prepares plan's nodes; gids (one per node, or nil) are the
// group ids they run under.
func newCluster(plan *launch.Plan, bin string, gids []uint32) *Cluster {
	c := &Cluster{plan: plan, bin: bin, gids: gids, procs: make([]*proc, len(plan.Nodes)),
		stopped: make([]bool, len(plan.Nodes)), spawn: make(chan spawnReq)}
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		for r := range c.spawn {
			r.out <- c.start(r.i)
		}
	}()
	return c
}

// start runs node index i (called on the spawning goroutine).
func (c *Cluster) start(i int) error {
	n := c.plan.Nodes[i]
	log, err := os.OpenFile(n.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("chaos: node %d: %w", n.ID, err)
	}
	defer log.Close() // the child has its own copy
	cmd := exec.Command(c.bin, "serve", "--config", n.Config)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if c.gids != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(os.Geteuid()), Gid: c.gids[i], Groups: []uint32{}}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("chaos: node %d: %w", n.ID, err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	c.procs[i], c.stopped[i] = p, false
	return nil
}

// Start starts node id (again) and waits until it answers on its client
// port.
func (c *Cluster) Start(ctx context.Context, id int) error {
	out := make(chan error, 1)
	c.spawn <- spawnReq{id - 1, out}
	if err := <-out; err != nil {
		return err
	}
	return c.waitServing(ctx, id)
}

// waitServing polls node id's client port until it answers a status
// request. METADATA_NOT_READY is an answer: a node of a cluster that is
// forming (or restarting whole) loads the committed metadata only once a
// quorum of nodes runs, so the first node started cannot wait for it;
// WaitFormed waits for the cluster.
func (c *Cluster) waitServing(ctx context.Context, id int) error {
	ctx, cancel := context.WithTimeout(ctx, servingWaitMax)
	defer cancel()
	n, p := c.plan.Nodes[id-1], c.procs[id-1]
	for {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		_, err := launch.Status(pctx, n.ClientAddr)
		pcancel()
		if err == nil || errors.Is(err, wire.ErrMetadataNotReady) {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("chaos: node %d exited while starting (%v); its log: %s", id, p.err, n.Log)
		case <-ctx.Done():
			return fmt.Errorf("chaos: node %d did not answer on %s within %v: %v", id, n.ClientAddr, servingWaitMax, err)
		case <-time.After(probeEvery):
		}
	}
}

// Exited returns an error naming a node that exited without being told to.
func (c *Cluster) Exited() error {
	for i, p := range c.procs {
		if p == nil {
			continue
		}
		select {
		case <-p.done:
			return fmt.Errorf("chaos: node %d exited on its own (%v); its log: %s", i+1, p.err, c.plan.Nodes[i].Log)
		default:
		}
	}
	return nil
}

// Kill sends SIGKILL to node id and waits for it.
func (c *Cluster) Kill(id int) error {
	p := c.procs[id-1]
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-p.done
	c.procs[id-1] = nil
	return nil
}

// Freeze sends SIGSTOP to node id; Thaw sends SIGCONT.
func (c *Cluster) Freeze(id int) error {
	c.stopped[id-1] = true
	return c.procs[id-1].cmd.Process.Signal(syscall.SIGSTOP)
}

// Thaw continues node id after Freeze.
func (c *Cluster) Thaw(id int) error {
	c.stopped[id-1] = false
	return c.procs[id-1].cmd.Process.Signal(syscall.SIGCONT)
}

// Pids lists the node processes' ids ("-" for a node not running).
func (c *Cluster) Pids() string {
	var out []string
	for _, p := range c.procs {
		if p == nil {
			out = append(out, "-")
		} else {
			out = append(out, strconv.Itoa(p.cmd.Process.Pid))
		}
	}
	return strings.Join(out, ",")
}

// Close stops every running node: SIGCONT to frozen ones, SIGTERM, then
// SIGKILL for any still running after stopGraceMax. It returns an error
// naming the nodes that did not stop cleanly. It ends the spawning
// goroutine; the cluster cannot start nodes afterwards.
func (c *Cluster) Close() error {
	var errs []string
	grace := time.NewTimer(stopGraceMax)
	defer grace.Stop()
	for i, p := range c.procs {
		if p == nil {
			continue
		}
		if c.stopped[i] {
			p.cmd.Process.Signal(syscall.SIGCONT)
		}
		p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for i, p := range c.procs {
		if p == nil {
			continue
		}
		select {
		case <-p.done:
		case <-grace.C:
			for _, q := range c.procs {
				if q != nil {
					q.cmd.Process.Kill()
				}
			}
			<-p.done
			errs = append(errs, fmt.Sprintf("node %d killed after %v", i+1, stopGraceMax))
		}
		if p.err != nil && !strings.Contains(strings.Join(errs, ""), fmt.Sprintf("node %d ", i+1)) {
			errs = append(errs, fmt.Sprintf("node %d: %v", i+1, p.err))
		}
		c.procs[i] = nil
	}
	if c.spawn != nil {
		close(c.spawn)
		c.spawn = nil
	}
	if len(errs) > 0 {
		return fmt.Errorf("chaos: stopping the cluster: %s", strings.Join(errs, "; "))
	}
	return nil
}
