package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ClusterOptions describe a local corestream cluster to launch through
// the cluster launcher tool (tools/localcluster, `make cluster`).
type ClusterOptions struct {
	// Cmd is the launcher's command line. Its words may hold the
	// placeholders {nodes}, {dir}, {fsync} and {shards}. It must print
	// one JSON document describing the nodes on standard output once
	// they serve (see parseClusterDoc), and may keep running until
	// SIGTERM. Empty: the launcher does not exist yet (ErrPending).
	Cmd []string
	// Nodes is the cluster size.
	Nodes int
	// Dir holds the nodes' data and the launcher's log.
	Dir string
	// Fsync is storage.fsync on every node; Shards shard.count.
	Fsync  string
	Shards int
}

// ClusterNode is one node as the launcher describes it.
type ClusterNode struct {
	ID         int    `json:"id"`
	Pid        int    `json:"pid"`
	ClientAddr string `json:"client_addr"`
	DataDir    string `json:"data_dir"`
}

// LaunchCluster starts a local cluster with opt.Cmd and returns once it
// printed its nodes. It returns an error wrapping ErrPending when there
// is no launcher command or its program does not exist.
func LaunchCluster(ctx context.Context, opt ClusterOptions) (*Deployment, error) {
	if len(opt.Cmd) == 0 {
		return nil, fmt.Errorf("%w: cluster: no local cluster launcher configured", ErrPending)
	}
	repl := strings.NewReplacer("{nodes}", strconv.Itoa(opt.Nodes), "{dir}", opt.Dir,
		"{fsync}", opt.Fsync, "{shards}", strconv.Itoa(opt.Shards))
	args := make([]string, len(opt.Cmd))
	for i, a := range opt.Cmd {
		args[i] = repl.Replace(a)
	}
	if _, err := exec.LookPath(args[0]); err != nil {
		return nil, fmt.Errorf("%w: cluster: launcher %s: %v", ErrPending, args[0], err)
	}
	if err := os.MkdirAll(opt.Dir, 0o755); err != nil {
		return nil, err
	}
	logPath := filepath.Join(opt.Dir, "launcher.log")
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	p, err := startProcess(args[0], args[1:], logPath, pw)
	pw.Close()
	if err != nil {
		pr.Close()
		return nil, err
	}
	nodes, err := readClusterDoc(ctx, pr, startTimeout)
	if err != nil {
		p.stop(stopGrace)
		return nil, fmt.Errorf("bench: cluster launcher (log %s): %w", logPath, err)
	}
	d := &Deployment{System: "corestream", Logs: []string{logPath},
		Settings: map[string]string{"nodes": strconv.Itoa(len(nodes)), "storage.fsync": opt.Fsync, "shard.count": shardsSetting(opt.Shards)},
		procs:    []*process{p}}
	for _, n := range nodes {
		d.Brokers = append(d.Brokers, n.ClientAddr)
		d.Pids = append(d.Pids, n.Pid)
	}
	d.stopExtra = func() error { return stopPids(d.Pids, stopGrace) }
	return d, nil
}

// readClusterDoc decodes the launcher's JSON document from r.
func readClusterDoc(ctx context.Context, r *os.File, timeout time.Duration) ([]ClusterNode, error) {
	type res struct {
		nodes []ClusterNode
		err   error
	}
	got := make(chan res, 1)
	go func() {
		defer r.Close()
		var raw json.RawMessage
		if err := json.NewDecoder(r).Decode(&raw); err != nil {
			got <- res{err: fmt.Errorf("reading its JSON: %w", err)}
			return
		}
		nodes, err := parseClusterDoc(raw)
		got <- res{nodes, err}
	}()
	select {
	case g := <-got:
		return g.nodes, g.err
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(timeout):
		return nil, fmt.Errorf("no JSON after %v", timeout)
	}
}

// parseClusterDoc reads the nodes from the launcher's document: either
// {"nodes": [...]} or a bare array, each node with an id, a pid, a client
// address (client_addr, clientAddr or client) and a data directory.
func parseClusterDoc(doc []byte) ([]ClusterNode, error) {
	var list []map[string]any
	var wrapped struct {
		Nodes []map[string]any `json:"nodes"`
	}
	if err := json.Unmarshal(doc, &wrapped); err == nil && len(wrapped.Nodes) > 0 {
		list = wrapped.Nodes
	} else if err := json.Unmarshal(doc, &list); err != nil {
		return nil, fmt.Errorf("cluster document is neither {\"nodes\": [...]} nor an array: %w", err)
	}
	if len(list) == 0 {
		return nil, errors.New("cluster document names no node")
	}
	out := make([]ClusterNode, 0, len(list))
	for i, m := range list {
		n := ClusterNode{ID: int(num(m, "id")), Pid: int(num(m, "pid")),
			ClientAddr: str(m, "client_addr", "clientAddr", "client"), DataDir: str(m, "data_dir", "dataDir", "data")}
		if n.Pid <= 0 || n.ClientAddr == "" {
			return nil, fmt.Errorf("cluster document: node %d has no pid or client address", i)
		}
		out = append(out, n)
	}
	return out, nil
}

func num(m map[string]any, key string) float64 {
	f, _ := m[key].(float64)
	return f
}

func str(m map[string]any, keys ...string) string {
	for _, k := range keys {
		if s, ok := m[k].(string); ok && s != "" {
			return s
		}
	}
	return ""
}

// stopPids sends SIGTERM to each live pid and waits up to grace for all
// of them to go, then kills what is left. Only pids the launcher reported
// are signalled.
func stopPids(pids []int, grace time.Duration) error {
	for _, pid := range pids {
		syscall.Kill(pid, syscall.SIGTERM)
	}
	err := waitFor(grace, 20*time.Millisecond, func() (bool, error) {
		for _, pid := range pids {
			if syscall.Kill(pid, 0) == nil && !zombie(pid) {
				return false, fmt.Errorf("pid %d still running", pid)
			}
		}
		return true, nil
	})
	if err != nil {
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return err
}

// zombie reports whether pid has exited and waits for its parent.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}
