package node

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/corestream/corestream/cluster/config"
)

// A node that cannot run (a port taken by another process, a data
// directory that cannot be one) fails before it writes anything or
// opens any listener.
func TestStartChecksPortsAndDataDirFirst(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		mutate func(c *config.Config)
		want   error
		text   string
	}{
		{"busy HTTP port", func(c *config.Config) { c.Node.HTTPAddr = busy.Addr().String() }, ErrAddressInUse, "node.http_addr"},
		{"busy client port", func(c *config.Config) { c.Node.ClientAddr = busy.Addr().String() }, ErrAddressInUse, "node.client_addr"},
		{"busy Kafka port", func(c *config.Config) { c.Node.KafkaAddr = busy.Addr().String() }, ErrAddressInUse, "node.kafka_addr"},
		{"data dir is a file", func(c *config.Config) { c.Node.DataDir = file }, ErrDataDirUnusable, "is not a directory"},
		{"data dir under a file", func(c *config.Config) { c.Node.DataDir = filepath.Join(file, "data") }, ErrDataDirUnusable, "is not a directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ports := freePorts(t, 2)
			cfg := config.Default()
			cfg.Node.DataDir = filepath.Join(t.TempDir(), "data")
			cfg.Node.ClientAddr = ports[0]
			cfg.Node.HTTPAddr = ports[1]
			cfg.Node.KafkaAddr = ""
			cfg.Shard.Count = 2
			tc.mutate(&cfg)
			n, err := New(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = n.Start()
			n.Stop(context.Background())
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("start: %v, want %v naming %q", err, tc.want, tc.text)
			}
			t.Logf("start: %v", err)
			if cfg.Node.DataDir != file {
				if _, err := os.Stat(cfg.Node.DataDir); !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
					t.Errorf("the data directory was created (%v)", err)
				}
			}
			// No listener was opened (or one was and is still open).
			for _, a := range []string{cfg.Node.ClientAddr, cfg.Node.HTTPAddr} {
				if a == busy.Addr().String() {
					continue
				}
				l, err := net.Listen("tcp", a)
				if err != nil {
					t.Errorf("%s is held after the failed start: %v", a, err)
					continue
				}
				l.Close()
			}
		})
	}
}
