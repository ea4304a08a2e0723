package harness

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// Network faults on loopback.
//
// Every node process runs with a group id of its own (NodeGID). The
// harness's iptables chain, jumped to from the filter table's OUTPUT
// chain, first marks every new connection with the conntrack mark of the
// node whose process opened it (an "owner" match on that group id);
// connections the harness itself opens (its clients) keep mark 0. On
// loopback every packet of both directions passes OUTPUT, and a
// connection's mark names the process that opened it, so a cut is one
// DROP rule per direction of initiative:
//
//	cut node A from node B:  mark(A) and a port of B   -> DROP
//	                         mark(B) and a port of A   -> DROP
//	cut the clients from A:  mark 0  and a port of A   -> DROP
//
// ("a port of B" matches source or destination, so both directions of
// the connection are dropped). Only the nodes' own ports are matched:
// nothing else on the machine is touched.

// Bounds and names of the network faults.
const (
	// chainPrefix names the harness's chains; the run's pid follows, so
	// that a later run can find and remove the chain of a dead run.
	chainPrefix = "CHAOS-"
	// markBase is ORed with a node id to make its connection mark.
	markBase = 0x43530000
	// gidBase plus a run slot and a node id is a node's group id: far
	// above any group of a real system.
	gidBase = 3_000_000_000
	// gidSlotsMax and gidNodesMax split the group-id space between runs
	// (by pid) and the nodes of a run.
	gidSlotsMax = 1_000_000
	gidNodesMax = 64
	// iptablesWaitSeconds bounds iptables' wait for the xtables lock.
	iptablesWaitSeconds = "10"
)

// Errors of the network faults.
var (
	// ErrNetUnavailable is returned by NewNet when iptables cannot be used
	// (not root, no binary, or a backend that refuses the rules); the
	// message says which. The harness then skips network faults.
	ErrNetUnavailable = errors.New("chaos: network faults unavailable")
)

// NodeGID is the group id node id runs under in the run of process pid.
func NodeGID(pid, id int) uint32 {
	return uint32(gidBase + (pid%gidSlotsMax)*gidNodesMax + id)
}

// nodeMark is the conntrack mark of connections node id opens.
func nodeMark(id int) string { return fmt.Sprintf("0x%x", markBase|id) }

// NodePorts are the TCP ports node ID listens on.
type NodePorts struct {
	ID    int
	GID   uint32
	Ports []int
}

// Runner runs one iptables command (args without the program name) and
// returns its combined output. Tests replace it.
type Runner func(args ...string) ([]byte, error)

// ExecIptables runs the iptables binary.
func ExecIptables(args ...string) ([]byte, error) {
	cmd := exec.Command("iptables", append([]string{"-w", iptablesWaitSeconds}, args...)...)
	return cmd.CombinedOutput()
}

// Net is the harness's iptables chain. Its methods are called by one
// goroutine.
type Net struct {
	run   Runner
	chain string
	nodes map[int]NodePorts
	// cuts are the DROP rules in force (rule specs without -A/-D chain).
	cuts [][]string
}

// markRules are the rules that give each node's connections its mark.
func markRules(nodes []NodePorts) [][]string {
	var out [][]string
	for _, n := range nodes {
		out = append(out, []string{"-m", "conntrack", "--ctstate", "NEW", "-m", "owner", "--gid-owner",
			strconv.FormatUint(uint64(n.GID), 10), "-j", "CONNMARK", "--set-mark", nodeMark(n.ID)})
	}
	return out
}

// dropRule drops TCP packets of connections with mark whose source or
// destination port is one of ports.
func dropRule(mark string, ports []int) []string {
	ps := make([]string, len(ports))
	for i, p := range ports {
		ps[i] = strconv.Itoa(p)
	}
	return []string{"-p", "tcp", "-m", "connmark", "--mark", mark, "-m", "multiport", "--ports", strings.Join(ps, ","), "-j", "DROP"}
}

// IsolateRules are the rules that cut node id from every other node in
// both directions (client connections are not touched).
func IsolateRules(nodes []NodePorts, id int) [][]string {
	var self NodePorts
	for _, n := range nodes {
		if n.ID == id {
			self = n
		}
	}
	var out [][]string
	for _, n := range nodes {
		if n.ID == id {
			continue
		}
		out = append(out, dropRule(nodeMark(id), n.Ports), dropRule(nodeMark(n.ID), self.Ports))
	}
	return out
}

// ClientCutRules are the rules that cut the harness's clients (mark 0)
// from node id's ports.
func ClientCutRules(nodes []NodePorts, id int) [][]string {
	for _, n := range nodes {
		if n.ID == id {
			return [][]string{dropRule("0", n.Ports)}
		}
	}
	return nil
}

// NewNet creates the chain CHAOS-<pid>, jumps to it first thing from
// OUTPUT, and installs the mark rules. It first removes the chains of
// earlier runs whose process is gone. ErrNetUnavailable when iptables
// cannot be used; the caller then runs without network faults.
func NewNet(run Runner, pid int, nodes []NodePorts) (*Net, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: iptables needs root (running as uid %d)", ErrNetUnavailable, os.Geteuid())
	}
	if _, err := exec.LookPath("iptables"); err != nil && run == nil {
		return nil, fmt.Errorf("%w: no iptables binary on PATH (Debian: apt-get install -y iptables)", ErrNetUnavailable)
	}
	if run == nil {
		run = ExecIptables
	}
	RemoveStale(run, pidAlive)
	n := &Net{run: run, chain: chainPrefix + strconv.Itoa(pid), nodes: map[int]NodePorts{}}
	for _, np := range nodes {
		n.nodes[np.ID] = np
	}
	if out, err := run("-N", n.chain); err != nil {
		return nil, fmt.Errorf("%w: iptables -N %s: %v: %s", ErrNetUnavailable, n.chain, err, bytes.TrimSpace(out))
	}
	if out, err := run("-I", "OUTPUT", "1", "-j", n.chain); err != nil {
		n.Close()
		return nil, fmt.Errorf("%w: iptables -I OUTPUT: %v: %s", ErrNetUnavailable, err, bytes.TrimSpace(out))
	}
	for _, r := range markRules(nodes) {
		if out, err := run(append([]string{"-A", n.chain}, r...)...); err != nil {
			n.Close()
			return nil, fmt.Errorf("%w: the owner/connmark rule (iptables backend without the owner, conntrack or CONNMARK extension?): %v: %s",
				ErrNetUnavailable, err, bytes.TrimSpace(out))
		}
	}
	return n, nil
}

// Chain is the name of the harness's chain.
func (n *Net) Chain() string { return n.chain }

// Cut installs rules (from IsolateRules or ClientCutRules).
func (n *Net) Cut(rules [][]string) error {
	for _, r := range rules {
		if out, err := n.run(append([]string{"-A", n.chain}, r...)...); err != nil {
			return fmt.Errorf("chaos: iptables -A %s %s: %v: %s", n.chain, strings.Join(r, " "), err, bytes.TrimSpace(out))
		}
		n.cuts = append(n.cuts, r)
	}
	return nil
}

// Heal removes every cut; the mark rules stay.
func (n *Net) Heal() error {
	var first error
	for _, r := range n.cuts {
		if out, err := n.run(append([]string{"-D", n.chain}, r...)...); err != nil && first == nil {
			first = fmt.Errorf("chaos: iptables -D %s %s: %v: %s", n.chain, strings.Join(r, " "), err, bytes.TrimSpace(out))
		}
	}
	n.cuts = nil
	return first
}

// Close removes the jump from OUTPUT and the chain with every rule in it.
// It is safe to call more than once.
func (n *Net) Close() error {
	n.cuts = nil
	return removeChain(n.run, n.chain)
}

// removeChain deletes every jump from OUTPUT to chain, then flushes and
// deletes chain.
func removeChain(run Runner, chain string) error {
	for i := 0; i < 16; i++ { // bounded: one jump is installed per run
		if _, err := run("-D", "OUTPUT", "-j", chain); err != nil {
			break
		}
	}
	run("-F", chain)
	if out, err := run("-X", chain); err != nil && !bytes.Contains(out, []byte("No chain")) && !bytes.Contains(out, []byte("does not exist")) {
		return fmt.Errorf("chaos: iptables -X %s: %v: %s", chain, err, bytes.TrimSpace(out))
	}
	return nil
}

// staleChains lists the harness chains in `iptables -S` output whose pid
// alive says is gone.
func staleChains(listing []byte, alive func(int) bool) []string {
	var out []string
	for _, line := range strings.Split(string(listing), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || f[0] != "-N" || !strings.HasPrefix(f[1], chainPrefix) {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimPrefix(f[1], chainPrefix))
		if err != nil || alive(pid) {
			continue
		}
		out = append(out, f[1])
	}
	sort.Strings(out)
	return out
}

// RemoveStale removes the chains left by runs whose process is gone (a
// run killed with SIGKILL cannot clean up after itself) and returns
// their names.
func RemoveStale(run Runner, alive func(int) bool) []string {
	listing, err := run("-S")
	if err != nil {
		return nil
	}
	stale := staleChains(listing, alive)
	for _, c := range stale {
		removeChain(run, c)
	}
	return stale
}

// pidAlive reports whether a process pid exists.
func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// nodePorts lists the nodes' ports in id order.
func (n *Net) nodePorts() []NodePorts {
	out := make([]NodePorts, 0, len(n.nodes))
	for _, np := range n.nodes {
		out = append(out, np)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// NetUsable says why network faults cannot run here (wrapping
// ErrNetUnavailable), or nil when they can: it creates a chain with one
// owner/connmark rule, like a run's, and removes it.
func NetUsable() error {
	pid := os.Getpid()
	probe := gidNodesMax - 1 // no run has a node with this id
	n, err := NewNet(nil, pid, []NodePorts{{ID: probe, GID: NodeGID(pid, probe)}})
	if err != nil {
		return err
	}
	return n.Close()
}
