package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/tools/localcluster/launch"
)

// -tls: the launcher generates a CA under the cluster's directory, names
// it in its JSON, and every node serves TLS on every listener: the client
// port answers a client that trusts the CA (and refuses a plaintext
// one), the replication links form the cluster, HTTP is HTTPS.
func TestLaunchTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds two binaries and runs two brokers")
	}
	bins := t.TempDir()
	corestream := goBuild(t, bins, "github.com/corestream/corestream/cmd/corestream")
	tool := goBuild(t, bins, "github.com/corestream/corestream/tools/localcluster")
	dir := filepath.Join(t.TempDir(), "cluster")
	cmd, doc, exited, stderr := startLauncher(t, tool, "-n", "2", "-dir", dir, "-bin", corestream, "-shards", "1", "-fsync", "never", "-tls")
	if doc.CAFile != filepath.Join(dir, "tls", "ca.pem") {
		t.Fatalf("ca_file %q", doc.CAFile)
	}
	pem, err := os.ReadFile(doc.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("ca_file holds no certificate")
	}
	tc := &tls.Config{RootCAs: pool}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	for _, n := range doc.Nodes {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := launch.StatusTLS(ctx, n.ClientAddr, tc)
		cancel()
		if err != nil || len(st.Nodes) != 2 {
			t.Fatalf("node %d over TLS: %v %+v", n.ID, err, st)
		}
		ctx, cancel = context.WithTimeout(context.Background(), 3*time.Second)
		_, err = launch.Status(ctx, n.ClientAddr)
		cancel()
		if err == nil {
			t.Errorf("node %d answered a plaintext client", n.ID)
		}
		resp, err := hc.Get("https://" + n.HTTPAddr + "/v1/health")
		if err != nil {
			t.Fatalf("node %d HTTPS: %v", n.ID, err)
		}
		resp.Body.Close()
	}
	if !strings.Contains(stderr.String(), "--tls-ca "+doc.CAFile) {
		t.Errorf("the hint does not name the CA:\n%s", stderr.String())
	}
	cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the launcher exited with %v after SIGINT:\n%s", err, stderr.String())
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("the launcher still runs 90 s after SIGINT:\n%s", stderr.String())
	}
}
