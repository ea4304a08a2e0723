package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/node"
	"github.com/spf13/cobra"
)

func init() { commands = append(commands, newServeCmd) }

// shutdownTimeout bounds a graceful stop: in-flight requests answered,
// partitions closed cleanly.
const shutdownTimeout = 30 * time.Second

func newServeCmd() *cobra.Command {
	var (
		path, data, clientAddr, httpAddr, kafkaAddr string
		shards                                      int
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "run a broker node (a single node on embedded defaults without --config)",
		Long: "serve runs one corestream node until SIGINT or SIGTERM, then stops gracefully:\n" +
			"it stops accepting, answers what is in flight and closes every partition cleanly.\n" +
			"Without --config it runs a single node on the embedded defaults (docs/configuration.md);\n" +
			"the flags override the file.",
		Args: argsRange(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			a := appFrom(cmd)
			cfg, err := config.Load(path)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("data") {
				cfg.Node.DataDir = data
			}
			if cmd.Flags().Changed("client-addr") {
				cfg.Node.ClientAddr = clientAddr
			}
			if cmd.Flags().Changed("http-addr") {
				cfg.Node.HTTPAddr = httpAddr
			}
			if cmd.Flags().Changed("kafka-addr") {
				cfg.Node.KafkaAddr = kafkaAddr
			}
			if cmd.Flags().Changed("shards") {
				cfg.Shard.Count = shards
			}
			if err := cfg.Validate(); err != nil {
				return err
			}
			level := map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}[cfg.Log.Level]
			logger := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: level}))
			n, err := node.New(cfg, logger)
			if err != nil {
				return err
			}
			if err := n.Start(); err != nil {
				n.Stop(context.Background())
				return err
			}
			fmt.Fprintf(a.stdout, "corestream %s node %d serving clients on %s (data in %s)\n", node.Version, cfg.Node.ID, n.ClientAddr(), cfg.Node.DataDir)
			printListeners(a.stdout, &cfg, n)
			// SIGHUP rereads the TLS certificate (security.tls_cert_file).
			hup := make(chan os.Signal, 1)
			signal.Notify(hup, syscall.SIGHUP)
			defer signal.Stop(hup)
			done := make(chan struct{})
			defer close(done)
			go func() {
				for {
					select {
					case <-hup:
						n.ReloadTLS()
					case <-done:
						return
					}
				}
			}()
			<-cmd.Context().Done()
			logger.Info("stopping")
			ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
			defer cancel()
			if err := n.Stop(ctx); err != nil {
				return fmt.Errorf("stopping: %w", err)
			}
			logger.Info("stopped")
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&path, "config", "", "TOML configuration file (default: the embedded defaults)")
	f.StringVar(&data, "data", "", "data directory (node.data_dir; default ./data)")
	f.StringVar(&clientAddr, "client-addr", "", "client listener HOST:PORT (node.client_addr; default 127.0.0.1:7070)")
	f.StringVar(&httpAddr, "http-addr", "", "HTTP API HOST:PORT, empty to disable (node.http_addr; default 127.0.0.1:7072)")
	f.StringVar(&kafkaAddr, "kafka-addr", "", "Kafka protocol listener HOST:PORT, empty to disable (node.kafka_addr; default 127.0.0.1:9092)")
	f.IntVar(&shards, "shards", 0, "shards, 0 = one per CPU (shard.count)")
	return cmd
}

// printListeners prints one line a listener after the serving line, each
// "WHAT on ADDRESS" with the address as a client uses it, so that a
// newcomer can copy it: the Kafka port, the HTTP API, the console and
// /metrics on it, and the replication port of a cluster's node.
func printListeners(w io.Writer, cfg *config.Config, n *node.Node) {
	if k := n.KafkaAddr(); k != "" {
		fmt.Fprintf(w, "Kafka protocol on %s\n", k)
	}
	if h := n.HTTPAddr(); h != "" {
		scheme := "http"
		if cfg.Security.TLSCertFile != "" {
			scheme = "https"
		}
		fmt.Fprintf(w, "HTTP API on %s://%s\n", scheme, h)
		fmt.Fprintf(w, "console on %s://%s/\n", scheme, h)
		fmt.Fprintf(w, "metrics on %s://%s/metrics\n", scheme, h)
	}
	if len(cfg.Cluster.Nodes) > 1 && cfg.Node.ReplicationAddr != "" {
		fmt.Fprintf(w, "replication on %s\n", cfg.Node.ReplicationAddr)
	}
}
