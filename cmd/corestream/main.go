// Command corestream is corestream's one binary: the broker (`serve`) and
// the client-side commands (`topic`, `produce`, `consume`, `cluster`,
// `partition`), documented in docs/cli.md.
//
// # Adding a subcommand
//
// Subcommands register themselves: each file appends its builder to
// commands in an init function, and the root command adds every builder's
// command, so a new file needs no edit here:
//
//	func init() { commands = append(commands, newServeCmd) }
//
// A command reads the global flags and the process's streams through
// appFrom(cmd), and returns errors rather than exiting: run maps them to
// exit codes (0 success, 1 error, 2 usage; usage errors wrap errUsage).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// commands holds the builders of the root's subcommands, appended by each
// file's init function.
var commands []func() *cobra.Command

// Exit codes (docs/cli.md).
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// Environment variables.
const (
	envBrokers = "CORESTREAM_BROKERS"
	// defaultBrokers is the address of a default single node.
	defaultBrokers = "127.0.0.1:7070"
	defaultTimeout = 30 * time.Second
)

// errUsage is wrapped by errors that are the caller's misuse of the
// command line (exit code 2).
var errUsage = errors.New("usage")

// usageErrorf returns an error wrapping errUsage.
func usageErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// app is what every command shares: the global flags and the streams.
type app struct {
	brokers string
	// user and password authenticate to the cluster (--user,
	// --password or $CORESTREAM_USER, $CORESTREAM_PASSWORD).
	user, password string
	// tls is --tls, --tls-ca, --tls-cert, --tls-key.
	tls     tlsFlags
	json    bool
	timeout time.Duration
	getenv  func(string) string
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
}

type appKey struct{}

// appFrom returns the app of a running command.
func appFrom(cmd *cobra.Command) *app {
	return cmd.Context().Value(appKey{}).(*app)
}

// run executes the command line args and returns the exit code. It is main
// without the process: tests call it with their own streams and
// environment.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	a := &app{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr}
	root := newRootCmd(a)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(context.WithValue(ctx, appKey{}, a))
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "corestream: %s\n", strings.TrimPrefix(err.Error(), errUsage.Error()+": "))
	if isUsage(err) {
		fmt.Fprintln(stderr, "Run 'corestream --help' for usage.")
		return exitUsage
	}
	return exitError
}

// isUsage reports whether err is a command-line misuse: ours, or cobra's
// (unknown command or flag, bad flag value, missing required flag).
func isUsage(err error) bool {
	if errors.Is(err, errUsage) {
		return true
	}
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "required flag", "invalid argument", "flag needs an argument", "accepts ", "requires at least", "requires at most"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}

// newRootCmd builds the root command with the global flags and every
// registered subcommand.
func newRootCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "corestream",
		Short: "corestream: a clustered message-streaming broker and its client tools",
		Long: "corestream runs a broker node (serve) and talks to a cluster (topic, produce, consume,\n" +
			"cluster, partition). Brokers come from --brokers, else $" + envBrokers + ", else " + defaultBrokers + ".\n" +
			"Exit codes: 0 success, 1 error, 2 usage.",
		SilenceErrors:     true,
		SilenceUsage:      true,
		CompletionOptions: cobra.CompletionOptions{DisableDefaultCmd: true},
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if a.brokers == "" {
				a.brokers = a.getenv(envBrokers)
			}
			if a.brokers == "" {
				a.brokers = defaultBrokers
			}
			if a.user == "" {
				a.user = a.getenv(envUser)
			}
			if a.password == "" {
				a.password = a.getenv(envPassword)
			}
			if a.timeout <= 0 {
				return usageErrorf("--timeout must be positive, not %v", a.timeout)
			}
			return nil
		},
		RunE:    groupRun,
		Version: versionLine(),
	}
	// --version prints the same line as `corestream version`.
	root.SetVersionTemplate("{{.Version}}\n")
	f := root.PersistentFlags()
	f.StringVar(&a.brokers, "brokers", "", "comma-separated seed brokers HOST:PORT (default $"+envBrokers+" or "+defaultBrokers+")")
	f.BoolVar(&a.json, "json", false, "print machine-readable JSON")
	f.StringVar(&a.user, "user", "", "authenticate as this user (default $"+envUser+"); needed by a cluster with security.auth = scram")
	f.StringVar(&a.password, "password", "", "the user's password (default $"+envPassword+", which keeps it out of the process list)")
	a.tls.register(f)
	f.DurationVar(&a.timeout, "timeout", defaultTimeout, "how long to wait for the cluster: connecting, each admin command, each produced line's answer, consume's next message")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return fmt.Errorf("%w: %w", errUsage, err) })
	for _, build := range commands {
		root.AddCommand(build())
	}
	return root
}

// groupRun is the RunE of commands that only group subcommands: called
// without one (or with an unknown one) they print their help and fail
// with a usage error.
func groupRun(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErrorf("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	cmd.SetOut(cmd.ErrOrStderr())
	cmd.Help()
	return usageErrorf("%s needs a subcommand", cmd.CommandPath())
}

// args returns a positional-argument check whose failures are usage errors.
func argsRange(lo, hi int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < lo || len(args) > hi {
			return usageErrorf("%s takes %s", cmd.CommandPath(), names)
		}
		return nil
	}
}
