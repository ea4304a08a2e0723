// Command peerbench runs corestream's bench workloads against NATS
// JetStream: the same Spec, runner, histograms and report as `corestream
// bench`, with a driver over nats.go. It lives in its own module so that
// the main module never depends on NATS; `make bench-peer` builds it.
//
//	peerbench produce|consume|e2e --brokers nats://127.0.0.1:4222 [workload flags] [--json FILE]
//
// Exit codes: 0 success, 1 a failed run (the report is still written), 2
// usage.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/corestream/corestream/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: peerbench produce|consume|e2e --brokers URLS [flags]")
		return 2
	}
	mode := bench.Mode(args[0])
	spec := bench.DefaultSpec(mode)
	fs := pflag.NewFlagSet("peerbench "+args[0], pflag.ContinueOnError)
	fs.SetOutput(stderr)
	brokers := fs.String("brokers", "nats://127.0.0.1:4222", "comma-separated NATS server URLs")
	jsonPath := fs.String("json", "", "write the whole report as JSON to FILE ('-': standard output, instead of the table)")
	progress := fs.Bool("progress", true, "draw a progress bar on standard error")
	spec.AddFlags(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	spec.Brokers = bench.BrokerList(*brokers)
	if err := spec.Validate(); err != nil {
		fmt.Fprintln(stderr, "peerbench:", err)
		return 2
	}
	opt := bench.Options{}
	if *progress {
		opt.Progress = stderr
	}
	sys := &natsJS{}
	defer sys.Close()
	rep, err := bench.Run(ctx, sys, spec, opt)
	if rep != nil {
		if *jsonPath != "-" {
			rep.WriteTable(stdout)
		}
		if *jsonPath != "" {
			err = errors.Join(err, rep.WriteJSON(*jsonPath, stdout))
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "peerbench:", err)
		return 1
	}
	return 0
}
