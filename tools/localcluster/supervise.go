package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/corestream/corestream/tools/localcluster/launch"
)

// startAll starts every node of plan; on failure it returns those it
// started so the caller can stop them.
func startAll(plan *launch.Plan, bin string) ([]*launch.Process, error) {
	var procs []*launch.Process
	for _, n := range plan.Nodes {
		p, err := launch.Start(bin, n)
		if err != nil {
			return procs, err
		}
		procs = append(procs, p)
	}
	return procs, nil
}

// waitFormed waits until the cluster has formed, a node exits, a signal
// arrives, or timeout passes.
func waitFormed(plan *launch.Plan, procs []*launch.Process, timeout time.Duration, sigs <-chan os.Signal) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- plan.WaitFormed(ctx, func() error {
			for _, p := range procs {
				if exited, err := p.Exited(); exited {
					return fmt.Errorf("node %d exited during start-up (%v); its log: %s", p.Node.ID, status(err), p.Node.Log)
				}
			}
			return nil
		})
	}()
	select {
	case err := <-done:
		return err
	case sig := <-sigs:
		cancel()
		<-done
		return fmt.Errorf("%v during start-up", sig)
	}
}

// restartCommand is the shell command that starts node n again as the
// launcher did: the corestream binary bin (not the launcher's own, which
// cannot serve) with the node's configuration, its output appended to the
// node's log.
func restartCommand(bin string, n launch.Node) string {
	return shellQuote(bin) + " serve --config " + shellQuote(n.Config) + " >>" + shellQuote(n.Log) + " 2>&1"
}

// shellQuote returns s as one POSIX shell word: unchanged when it holds
// only characters no shell treats specially, else in single quotes.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+=:,@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// supervise waits for a signal, forwards it to every node and waits for
// them to stop; it reports nodes that exit on their own, with the command
// that restarts each (bin is the corestream binary they run). It returns
// the exit code.
func supervise(procs []*launch.Process, bin string, sigs <-chan os.Signal, stderr io.Writer) int {
	exits := make(chan *launch.Process, len(procs))
	for _, p := range procs {
		go func() {
			<-p.Done()
			exits <- p
		}()
	}
	running := len(procs)
	for running > 0 {
		select {
		case p := <-exits:
			running--
			fmt.Fprintf(stderr, "localcluster: node %d (pid %d) exited: %s; restart it with: %s\n",
				p.Node.ID, p.Pid(), status(p.Err()), restartCommand(bin, p.Node))
		case sig := <-sigs:
			return stopAll(procs, sig, sigs, stderr)
		}
	}
	fmt.Fprintln(stderr, "localcluster: every node has exited")
	return 1
}

// stopAll forwards sig to every running node and waits for all of them;
// a second signal on sigs, or stopGrace passing, kills those still
// running. It returns 0 when every node it stopped exited cleanly.
func stopAll(procs []*launch.Process, sig os.Signal, sigs <-chan os.Signal, stderr io.Writer) int {
	var stopping []*launch.Process
	for _, p := range procs {
		if exited, _ := p.Exited(); exited {
			continue
		}
		if err := p.Signal(sig); err != nil {
			fmt.Fprintf(stderr, "localcluster: node %d (pid %d): %v\n", p.Node.ID, p.Pid(), err)
		}
		stopping = append(stopping, p)
	}
	grace := time.NewTimer(stopGrace)
	defer grace.Stop()
	code := 0
	for _, p := range stopping {
		select {
		case <-p.Done():
		case s := <-sigs:
			fmt.Fprintf(stderr, "localcluster: %v again: killing the nodes still running\n", s)
			killAll(stopping)
		case <-grace.C:
			fmt.Fprintf(stderr, "localcluster: nodes still running %v after %v: killing them\n", stopGrace, sig)
			killAll(stopping)
		}
		<-p.Done()
		fmt.Fprintf(stderr, "localcluster: node %d (pid %d) stopped: %s\n", p.Node.ID, p.Pid(), status(p.Err()))
		if p.Err() != nil {
			code = 1
		}
	}
	return code
}

func killAll(procs []*launch.Process) {
	for _, p := range procs {
		p.Signal(syscall.SIGKILL)
	}
}

// status renders an exit status.
func status(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}
