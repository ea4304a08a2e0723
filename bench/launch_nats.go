package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// NATSOptions describe a NATS JetStream deployment to launch: one server,
// or a cluster of Nodes servers.
type NATSOptions struct {
	// Bin is the nats-server binary.
	Bin string
	// Dir holds each server's configuration, file store and log.
	Dir string
	// Nodes is 1, or the cluster size.
	Nodes int
	// SyncAlways sets jetstream.sync_interval to always (an fsync per
	// write, like corestream's storage.fsync = always); otherwise the
	// default (flush every 2 minutes, like fsync = never for a run this
	// short).
	SyncAlways bool
}

// natsNodeConfig returns server i's configuration (ports: client, http,
// cluster of every server in order).
func natsNodeConfig(dir string, i int, client, monitor, cluster []int, syncAlways bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# written by corestream bench\nserver_name: %q\nlisten: \"127.0.0.1:%d\"\nhttp: \"127.0.0.1:%d\"\n",
		fmt.Sprintf("n%d", i+1), client[i], monitor[i])
	fmt.Fprintf(&b, "jetstream {\n  store_dir: %q\n", filepath.Join(dir, fmt.Sprintf("n%d", i+1)))
	if syncAlways {
		b.WriteString("  sync_interval: always\n")
	}
	b.WriteString("}\n")
	if len(cluster) > 1 {
		var routes []string
		for j, p := range cluster {
			if j != i {
				routes = append(routes, fmt.Sprintf("%q", fmt.Sprintf("nats-route://127.0.0.1:%d", p)))
			}
		}
		fmt.Fprintf(&b, "cluster {\n  name: \"bench\"\n  listen: \"127.0.0.1:%d\"\n  routes: [%s]\n}\n",
			cluster[i], strings.Join(routes, ", "))
	}
	return b.String()
}

// NATSSettings describes the server settings of a deployment.
func NATSSettings(opt NATSOptions) map[string]string {
	sync := "default (2m): page cache, flushed every 2 minutes"
	if opt.SyncAlways {
		sync = "always: fsync after every write"
	}
	return map[string]string{"nodes": strconv.Itoa(opt.Nodes), "jetstream.store": "file", "jetstream.sync_interval": sync}
}

// LaunchNATS starts nats-server(s) with JetStream on free loopback ports
// and returns once every server reports healthy (JetStream ready, and a
// meta leader in a cluster).
func LaunchNATS(ctx context.Context, opt NATSOptions) (*Deployment, error) {
	n := max(opt.Nodes, 1)
	ports, err := freePorts(3 * n)
	if err != nil {
		return nil, err
	}
	client, monitor, cluster := ports[:n], ports[n:2*n], ports[2*n:]
	if n == 1 {
		cluster = nil
	}
	if err := os.MkdirAll(opt.Dir, 0o755); err != nil {
		return nil, err
	}
	d := &Deployment{System: "nats-jetstream", Settings: NATSSettings(NATSOptions{Nodes: n, SyncAlways: opt.SyncAlways})}
	for i := range n {
		cfg := filepath.Join(opt.Dir, fmt.Sprintf("n%d.conf", i+1))
		if err := os.WriteFile(cfg, []byte(natsNodeConfig(opt.Dir, i, client, monitor, cluster, opt.SyncAlways)), 0o644); err != nil {
			d.Stop()
			return nil, err
		}
		logPath := filepath.Join(opt.Dir, fmt.Sprintf("n%d.log", i+1))
		p, err := startProcess(opt.Bin, []string{"-c", cfg}, logPath, nil)
		if err != nil {
			d.Stop()
			return nil, err
		}
		d.procs = append(d.procs, p)
		d.Pids = append(d.Pids, p.pid())
		d.Logs = append(d.Logs, logPath)
		d.Brokers = append(d.Brokers, fmt.Sprintf("nats://127.0.0.1:%d", client[i]))
	}
	hc := &http.Client{Timeout: time.Second}
	err = waitFor(startTimeout, 50*time.Millisecond, func() (bool, error) {
		if ctx.Err() != nil {
			return true, nil
		}
		for i, p := range d.procs {
			if p.exited() {
				return false, fmt.Errorf("nats-server %d exited (log %s)", i+1, d.Logs[i])
			}
			resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", monitor[i]))
			if err != nil {
				return false, err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return false, fmt.Errorf("nats-server %d: healthz %s", i+1, resp.Status)
			}
		}
		return true, nil
	})
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		d.Stop()
		return nil, fmt.Errorf("bench: starting NATS: %w", err)
	}
	return d, nil
}
