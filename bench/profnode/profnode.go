// Package profnode runs a corestream node in the bench harness's own
// process with a CPU profile: `corestream bench node`, used by
// `bench compare` when CORESTREAM_BENCH_CPUPROFILE_DIR is set. It is kept
// out of package bench so that the load generators (and the peer's) do not
// link the broker.
package profnode

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/pprof"
	"time"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/node"
)

// ServeNode runs one node from the configuration file path until ctx
// ends, as `corestream serve --config` does, writing a CPU profile of the
// whole process to profile (when not empty) until it stops, and the
// allocations made until then to memProfile (when not empty). It prints
// the same start-up line as serve on stdout.
func ServeNode(ctx context.Context, path, profile, memProfile string, stdout, stderr io.Writer, stopTimeout time.Duration) error {
	cfg, err := config.Load(path)
	if err != nil {
		return err
	}
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	n, err := node.New(cfg, slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return err
	}
	if err := n.Start(); err != nil {
		n.Stop(context.Background())
		return err
	}
	fmt.Fprintf(stdout, "corestream %s node %d serving clients on %s (data in %s)\n", node.Version, cfg.Node.ID, n.ClientAddr(), cfg.Node.DataDir)
	<-ctx.Done()
	if memProfile != "" {
		if err := writeAllocs(memProfile); err != nil {
			fmt.Fprintf(stderr, "corestream: %v\n", err)
		}
	}
	sctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
	defer cancel()
	return n.Stop(sctx)
}

// writeAllocs writes the allocations sampled so far (pprof's allocs
// profile) to path.
func writeAllocs(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("allocation profile: %w", err)
	}
	return f.Close()
}
