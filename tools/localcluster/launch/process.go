package launch

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Process is one running node started by Start.
type Process struct {
	Node Node
	cmd  *exec.Cmd
	log  *os.File
	// done is closed once the process has been waited for; err is its
	// exit status then.
	done chan struct{}
	err  error
}

// Start runs `bin serve --config node.Config`, appending its stdout and
// stderr to node.Log.
//
// The node runs in its own process group, so a terminal's Ctrl-C reaches
// only the launcher, which forwards it once (a second SIGINT would find
// the node already stopping). Its parent-death signal is SIGTERM: if the
// launcher dies without stopping it, the node stops gracefully by itself.
//
// REQUIRES: the calling goroutine is locked to its OS thread for as long
// as the node runs (Linux sends the parent-death signal when the thread
// that forked the child exits, not the process); the launcher calls Start
// from main after runtime.LockOSThread.
func Start(bin string, n Node) (*Process, error) {
	log, err := os.OpenFile(n.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("launch: node %d: %w", n.ID, err)
	}
	cmd := exec.Command(bin, "serve", "--config", n.Config)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("launch: node %d: %w", n.ID, err)
	}
	p := &Process{Node: n, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		log.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the node's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is the exit status (nil for exit code 0). REQUIRES: Done is closed.
func (p *Process) Err() error { return p.err }

// Exited reports whether the process has exited, and its status.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// Signal sends sig unless the process has exited.
func (p *Process) Signal(sig os.Signal) error {
	if done, _ := p.Exited(); done {
		return nil
	}
	err := p.cmd.Process.Signal(sig)
	if errors.Is(err, os.ErrProcessDone) {
		return nil
	}
	return err
}

// Stop sends sig and waits up to grace for the exit, then kills the
// process. It returns the exit status, or an error saying it was killed.
func (p *Process) Stop(sig os.Signal, grace time.Duration) error {
	if err := p.Signal(sig); err != nil {
		return err
	}
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return p.err
	case <-t.C:
		p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("launch: node %d did not stop within %v after %v; killed", p.Node.ID, grace, sig)
	}
}
