package harness

import (
	"context"
	"flag"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var (
	chaosSeed     = flag.Uint64("chaos.seed", 0, "seed of TestChaosShort's fault schedule (0: from the clock)")
	chaosDuration = flag.Duration("chaos.duration", 2*time.Minute, "bound of TestChaosShort's fault phase (it runs one fault of each kind)")
)

// testLog sends a run's progress lines to the test log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestChaosShort is the short run of the harness that `make test` runs: a
// 3-node cluster of real processes, topics of factors 1, 2 and 3, one
// fault of each kind (kill -9 and restart, SIGSTOP/SIGCONT, a node cut
// from its peers, the clients cut from a node), then every acknowledged
// write must be read back once, in order, at its offset, and the
// replicas must be byte-equal below the high watermark. The resumption
// times are logged, not held to the 2 s target (make chaos reports them
// over a long run). It needs root and iptables for the network faults
// and skips, saying why, without them.
func TestChaosShort(t *testing.T) { runShort(t, ClientSDK, "TestChaosShort") }

// TestChaosShortKafka is the same run with franz-go on the Kafka port:
// idempotent producers at acks=all, tailing consumers by assignment, and
// a consumer group of two members whose polls and commits CheckGroup
// checks for lost, skipped, reordered and inconsistent reads and for
// commits going back.
func TestChaosShortKafka(t *testing.T) { runShort(t, ClientKafka, "TestChaosShortKafka") }

// runShort runs the short run with the client; name is the test's (for
// the replay line).
func runShort(t *testing.T, clientKind, name string) {
	if testing.Short() {
		t.Skip("starts a cluster of processes for about a minute")
	}
	if err := NetUsable(); err != nil {
		t.Skipf("the short run needs its network faults: %v", err)
	}
	seed := *chaosSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("chaos seed %d", seed)
	defer func() {
		if t.Failed() {
			t.Logf("replay the schedule with: go test ./tools/chaos/harness -run '^%s$' -chaos.seed=%d", name, seed)
		}
	}()
	dir := t.TempDir()
	bin := filepath.Join(dir, "corestream")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/corestream/corestream/cmd/corestream").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Options{Bin: bin, Dir: filepath.Join(dir, "run"), Seed: seed, Duration: *chaosDuration, Client: clientKind,
		FaultsMax: len(AllKinds), Partitions: 2, HoldMin: time.Second, HoldMax: 3 * time.Second, GapMax: time.Second,
		Log: testLog{t}})
	if rep != nil {
		var b strings.Builder
		rep.Write(&b)
		t.Log("\n" + b.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("the checks failed: %d violations %v, replica mismatches %q", len(rep.Violations), rep.ViolationCounts, rep.ReplicaMismatches)
	}
	kinds := map[Kind]bool{}
	for _, f := range rep.Faults {
		kinds[f.Kind] = true
	}
	if len(kinds) != len(AllKinds) {
		t.Errorf("faults of kinds %v ran, want all of %v", kinds, AllKinds)
	}
	if clientKind == ClientKafka && (rep.Group == nil || rep.Group.Polled == 0 || rep.Group.Commits == 0 || !rep.Group.CaughtUp) {
		t.Errorf("the consumer group checked nothing or did not catch up: %+v", rep.Group)
	}
	if rep.WritesAcked == 0 || rep.ReplicasCompared == 0 || rep.BytesCompared == 0 {
		t.Errorf("nothing checked: %d writes acknowledged, %d replicas (%d bytes) compared", rep.WritesAcked, rep.ReplicasCompared, rep.BytesCompared)
	}
	if out, _ := exec.Command("iptables", "-S").CombinedOutput(); strings.Contains(string(out)+"\n", "-N "+rep.Chain+"\n") {
		t.Errorf("the run's chain %s is still installed:\n%s", rep.Chain, out)
	}
}
