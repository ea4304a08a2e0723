// Package enginetest is the conformance suite for segment.Engine
// implementations: every engine (the pwrite engine in segment, the io_uring
// engine in netio/uring) must pass Run.
//
// The suite writes real files in t.TempDir() through its own raw-descriptor
// vfs.File and checks what lands on disk, that every token comes back
// exactly once with the right error, and the blocking and wake-up contract
// of Reap and WakeFd. Tests that shuffle use a seeded RNG: the seed is
// logged, and ENGINETEST_SEED=<n> replays it.
//
// Call it from an external test package (package foo_test): enginetest
// imports segment, so segment's internal tests cannot import it.
package enginetest

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corestream/corestream/segment"
)

// opDeadline bounds how long the suite waits for any one engine call that
// may block (Reap with wait, Close). Generous: fdatasync on a shared,
// loaded machine can take a long time.
const opDeadline = 60 * time.Second

// Run runs the conformance suite. newEngine returns a fresh engine for each
// subtest (it may call t.Skip when the engine is unavailable here); the
// suite closes it.
func Run(t *testing.T, newEngine func(t *testing.T) segment.Engine) {
	cases := []struct {
		name string
		fn   func(h *harness)
	}{
		{"Name", testName},
		{"IdleReap", testIdleReap},
		{"OrderedWrites", testOrderedWrites},
		{"ShuffledWrites", testShuffledWrites},
		{"WriteSync", testWriteSync},
		{"SyncOnly", testSyncOnly},
		{"OutOfOrderAcrossFiles", testOutOfOrder},
		{"ReapWaitBlocks", testReapWaitBlocks},
		{"InFlightCounts", testInFlightCounts},
		{"TokensExactlyOnce", testTokensExactlyOnce},
		{"ZeroLength", testZeroLength},
		{"LargeWrite", testLargeWrite},
		{"ErrorReadOnlyFile", testErrorReadOnly},
		{"ErrorClosedFd", testErrorClosedFd},
		{"ManyInFlight", testManyInFlight},
		{"WakeFd", testWakeFd},
		{"CloseWithOpsInFlight", testCloseInFlight},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := &harness{t: t, dir: t.TempDir()}
			h.e = newEngine(t)
			t.Cleanup(h.cleanup)
			c.fn(h)
		})
	}
}

// harness is one subtest's engine, files and expectations.
type harness struct {
	t      *testing.T
	e      segment.Engine
	dir    string
	files  []*osFile
	closed bool // the test closed the engine itself
}

// cleanup closes the engine before the files it may still reference.
func (h *harness) cleanup() {
	if !h.closed {
		h.within("Close", func() {
			if err := h.e.Close(); err != nil {
				h.t.Errorf("Close: %v", err)
			}
		})
	}
	for _, f := range h.files {
		f.Close()
	}
}

// open opens (creating) a file in the subtest's directory.
func (h *harness) open(name string, flags int) *osFile {
	h.t.Helper()
	f, err := openOS(filepath.Join(h.dir, name), flags)
	if err != nil {
		h.t.Fatal(err)
	}
	h.files = append(h.files, f)
	return f
}

// create opens name read-write, creating it empty.
func (h *harness) create(name string) *osFile {
	return h.open(name, unix.O_RDWR|unix.O_CREAT|unix.O_TRUNC)
}

// within runs fn (which owns the engine meanwhile) and fails the test if it
// does not return within opDeadline, instead of hanging the test binary.
func (h *harness) within(what string, fn func()) {
	h.t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(opDeadline):
		h.t.Fatalf("%s did not return within %v", what, opDeadline)
	}
}

// done is one completion as Reap reported it.
type done struct {
	token uint64
	err   error
}

// reap calls Reap once and returns what it reported, in callback order.
func (h *harness) reap(wait bool) []done {
	h.t.Helper()
	var got []done
	var n int
	var err error
	h.within(fmt.Sprintf("Reap(wait=%v)", wait), func() {
		n, err = h.e.Reap(wait, func(token uint64, opErr error) {
			got = append(got, done{token, opErr})
		})
	})
	if err != nil {
		h.t.Fatalf("Reap(wait=%v): %v", wait, err)
	}
	if n != len(got) {
		h.t.Fatalf("Reap returned %d but called fn %d times", n, len(got))
	}
	return got
}

// reapAll reaps until every token in want came back, checking each comes
// back once and only tokens that were written come back. It returns the
// errors by token and the tokens in arrival order.
func (h *harness) reapAll(want map[uint64]bool) (errs map[uint64]error, order []uint64) {
	h.t.Helper()
	errs = map[uint64]error{}
	for len(errs) < len(want) {
		if h.e.InFlight() == 0 {
			h.t.Fatalf("InFlight is 0 with %d of %d tokens reported", len(errs), len(want))
		}
		got := h.reap(true)
		if len(got) == 0 {
			h.t.Fatalf("Reap(wait=true) reported nothing with %d in flight", h.e.InFlight())
		}
		for _, d := range got {
			if !want[d.token] {
				h.t.Fatalf("unknown token %d reported", d.token)
			}
			if _, dup := errs[d.token]; dup {
				h.t.Fatalf("token %d reported twice", d.token)
			}
			errs[d.token] = d.err
			order = append(order, d.token)
		}
	}
	if n := h.e.InFlight(); n != 0 {
		h.t.Fatalf("InFlight = %d after every token came back", n)
	}
	if got := h.reap(false); len(got) != 0 {
		h.t.Fatalf("extra completions after all tokens: %v", got)
	}
	return errs, order
}

// mustNil fails for any non-nil operation error.
func (h *harness) mustNil(errs map[uint64]error) {
	h.t.Helper()
	for tok, err := range errs {
		if err != nil {
			h.t.Fatalf("token %d: %v", tok, err)
		}
	}
}

// write queues a write, failing the test if Write refuses it.
func (h *harness) write(f *osFile, buf []byte, off int64, sync bool, token uint64) {
	h.t.Helper()
	if err := h.e.Write(f, buf, off, sync, token); err != nil {
		h.t.Fatalf("Write(token %d): %v", token, err)
	}
}

// submit calls Submit, failing the test on error.
func (h *harness) submit() {
	h.t.Helper()
	if err := h.e.Submit(); err != nil {
		h.t.Fatalf("Submit: %v", err)
	}
}

// checkFile compares the file's contents with want.
func (h *harness) checkFile(f *osFile, want []byte) {
	h.t.Helper()
	got, err := os.ReadFile(f.name)
	if err != nil {
		h.t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		h.t.Fatalf("%s: %d bytes on disk, want %d; first difference at byte %d", f.name, len(got), len(want), i)
	}
}

// pattern returns n bytes that identify (seed, position).
func pattern(seed uint64, n int) []byte {
	b := make([]byte, n)
	x := seed*0x9E3779B97F4A7C15 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
}

// seed returns the RNG seed for this run and logs it.
func seed(t *testing.T) uint64 {
	s := uint64(time.Now().UnixNano())
	if v := os.Getenv("ENGINETEST_SEED"); v != "" {
		var err error
		if s, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("ENGINETEST_SEED=%q: %v", v, err)
		}
	}
	t.Logf("seed %d (replay with ENGINETEST_SEED=%d)", s, s)
	return s
}

func testName(h *harness) {
	if h.e.Name() == "" {
		h.t.Fatal("Name is empty")
	}
}

// testIdleReap: with nothing in flight Reap returns 0 at once, even with wait.
func testIdleReap(h *harness) {
	if n := h.e.InFlight(); n != 0 {
		h.t.Fatalf("new engine has InFlight %d", n)
	}
	if got := h.reap(false); len(got) != 0 {
		h.t.Fatalf("Reap(false) on an idle engine reported %v", got)
	}
	start := time.Now()
	if got := h.reap(true); len(got) != 0 {
		h.t.Fatalf("Reap(true) on an idle engine reported %v", got)
	}
	if d := time.Since(start); d > 5*time.Second {
		h.t.Fatalf("Reap(true) on an idle engine blocked %v", d)
	}
	if err := h.e.Submit(); err != nil {
		h.t.Fatalf("Submit with nothing queued: %v", err)
	}
}

// testOrderedWrites: sequential appends, one Submit, land in order.
func testOrderedWrites(h *harness) {
	f := h.create("ordered")
	var want []byte
	tokens := map[uint64]bool{}
	for i := range 64 {
		buf := pattern(uint64(i), 4096+i)
		h.write(f, buf, int64(len(want)), false, uint64(i))
		want = append(want, buf...)
		tokens[uint64(i)] = true
	}
	h.submit()
	errs, _ := h.reapAll(tokens)
	h.mustNil(errs)
	h.checkFile(f, want)
}

// testShuffledWrites: disjoint writes of random sizes queued in random order
// with Submits at random points all land at their offsets.
func testShuffledWrites(h *harness) {
	rng := rand.New(rand.NewPCG(seed(h.t), 0))
	f := h.create("shuffled")
	const n = 200
	type w struct {
		off int64
		buf []byte
	}
	ws := make([]w, n)
	var size int64
	for i := range ws {
		ws[i] = w{off: size, buf: pattern(rng.Uint64(), 1+rng.IntN(16<<10))}
		size += int64(len(ws[i].buf))
	}
	want := make([]byte, size)
	for _, x := range ws {
		copy(want[x.off:], x.buf)
	}
	tokens := map[uint64]bool{}
	for i, j := range rng.Perm(n) {
		h.write(f, ws[j].buf, ws[j].off, rng.IntN(8) == 0, uint64(j))
		tokens[uint64(j)] = true
		if rng.IntN(16) == 0 || i == n-1 {
			h.submit()
		}
	}
	errs, _ := h.reapAll(tokens)
	h.mustNil(errs)
	h.checkFile(f, want)
}

// testWriteSync: writes with sync complete once each, without error, and
// their data is in the file.
func testWriteSync(h *harness) {
	f := h.create("synced")
	var want []byte
	tokens := map[uint64]bool{}
	for i := range 16 {
		buf := pattern(uint64(100+i), 64<<10)
		h.write(f, buf, int64(len(want)), true, uint64(i))
		want = append(want, buf...)
		tokens[uint64(i)] = true
		if i%4 == 3 {
			h.submit()
		}
	}
	errs, _ := h.reapAll(tokens)
	h.mustNil(errs)
	h.checkFile(f, want)
}

// testSyncOnly: a lone Sync after completed writes succeeds.
func testSyncOnly(h *harness) {
	f := h.create("synconly")
	buf := pattern(7, 32<<10)
	h.write(f, buf, 0, false, 1)
	h.submit()
	h.mustNil(must(h.reapAll(map[uint64]bool{1: true})))
	if err := h.e.Sync(f, 2); err != nil {
		h.t.Fatalf("Sync: %v", err)
	}
	h.submit()
	h.mustNil(must(h.reapAll(map[uint64]bool{2: true})))
	h.checkFile(f, buf)
}

func must(errs map[uint64]error, _ []uint64) map[uint64]error { return errs }

// testOutOfOrder: slow synced writes to one file and quick plain writes to
// another, interleaved; every token comes back once, in whatever order.
func testOutOfOrder(h *harness) {
	slow, quick := h.create("slow"), h.create("quick")
	var wantSlow, wantQuick []byte
	tokens := map[uint64]bool{}
	for i := range 32 {
		tok := uint64(2 * i)
		if i%4 == 0 {
			buf := pattern(tok, 256<<10)
			h.write(slow, buf, int64(len(wantSlow)), true, tok)
			wantSlow = append(wantSlow, buf...)
		} else {
			buf := pattern(tok, 512)
			h.write(quick, buf, int64(len(wantQuick)), false, tok)
			wantQuick = append(wantQuick, buf...)
		}
		tokens[tok] = true
	}
	h.submit()
	errs, order := h.reapAll(tokens)
	h.mustNil(errs)
	h.checkFile(slow, wantSlow)
	h.checkFile(quick, wantQuick)
	inOrder := true
	for i := 1; i < len(order); i++ {
		inOrder = inOrder && order[i-1] < order[i]
	}
	h.t.Logf("completions arrived in submission order: %v", inOrder)
}

// testReapWaitBlocks: Reap(wait=true) returns the one submitted operation.
func testReapWaitBlocks(h *harness) {
	f := h.create("wait")
	h.write(f, pattern(3, 128<<10), 0, true, 42)
	h.submit()
	got := h.reap(true)
	if len(got) != 1 || got[0].token != 42 || got[0].err != nil {
		h.t.Fatalf("Reap(true) with one op in flight reported %v, want token 42 with nil error", got)
	}
	if n := h.e.InFlight(); n != 0 {
		h.t.Fatalf("InFlight = %d after the only op was reaped", n)
	}
}

// testInFlightCounts: InFlight counts queued, submitted and unreaped ops.
func testInFlightCounts(h *harness) {
	f := h.create("counts")
	for i := range 5 {
		h.write(f, pattern(uint64(i), 1024), int64(i)*1024, false, uint64(i))
		if n := h.e.InFlight(); n != i+1 {
			h.t.Fatalf("InFlight = %d after %d writes", n, i+1)
		}
	}
	if err := h.e.Sync(f, 5); err != nil {
		h.t.Fatal(err)
	}
	if n := h.e.InFlight(); n != 6 {
		h.t.Fatalf("InFlight = %d after 5 writes and a sync", n)
	}
	h.submit()
	if n := h.e.InFlight(); n != 6 {
		h.t.Fatalf("InFlight = %d after Submit, want 6 until reaped", n)
	}
	h.mustNil(must(h.reapAll(map[uint64]bool{0: true, 1: true, 2: true, 3: true, 4: true, 5: true})))
}

// testTokensExactlyOnce: arbitrary token values, including 0 and the
// maximum, come back exactly once, reaped with a mix of polling and waiting.
func testTokensExactlyOnce(h *harness) {
	rng := rand.New(rand.NewPCG(seed(h.t), 1))
	f := h.create("tokens")
	want := map[uint64]bool{}
	toks := []uint64{0, math.MaxUint64, 1 << 63, 1}
	for len(toks) < 128 {
		toks = append(toks, rng.Uint64())
	}
	for i, tok := range toks {
		if want[tok] {
			continue
		}
		want[tok] = true
		h.write(f, pattern(tok, 512), int64(i)*512, i%16 == 0, tok)
	}
	h.submit()
	seen := map[uint64]bool{}
	for polls := 0; len(seen) < len(want); polls++ {
		for _, d := range h.reap(polls%2 == 1) {
			if d.err != nil {
				h.t.Fatalf("token %d: %v", d.token, d.err)
			}
			if !want[d.token] || seen[d.token] {
				h.t.Fatalf("token %d reported but not expected (or twice)", d.token)
			}
			seen[d.token] = true
		}
		if polls > 1_000_000 {
			h.t.Fatalf("only %d of %d tokens after %d Reaps", len(seen), len(want), polls)
		}
	}
	if n := h.e.InFlight(); n != 0 {
		h.t.Fatalf("InFlight = %d after every token came back", n)
	}
}

// testZeroLength: empty writes, with and without sync, succeed.
func testZeroLength(h *harness) {
	f := h.create("empty")
	h.write(f, nil, 0, false, 1)
	h.write(f, []byte{}, 0, true, 2)
	h.submit()
	h.mustNil(must(h.reapAll(map[uint64]bool{1: true, 2: true})))
	h.checkFile(f, nil)
}

// testLargeWrite: one 8 MiB write with sync.
func testLargeWrite(h *harness) {
	f := h.create("large")
	buf := pattern(9, 8<<20)
	h.write(f, buf, 4096, true, 1)
	h.submit()
	h.mustNil(must(h.reapAll(map[uint64]bool{1: true})))
	h.checkFile(f, append(make([]byte, 4096), buf...))
}

// testErrorReadOnly: writes to a read-only descriptor fail with EBADF,
// reported with their token, once (a failed write's sync does not report
// separately).
func testErrorReadOnly(h *harness) {
	f := h.create("ro")
	ro := h.open("ro", unix.O_RDONLY)
	h.write(ro, pattern(1, 4096), 0, false, 1)
	h.write(ro, pattern(2, 4096), 4096, true, 2)
	h.write(f, pattern(3, 4096), 0, true, 3) // a good one beside them
	h.submit()
	errs, _ := h.reapAll(map[uint64]bool{1: true, 2: true, 3: true})
	for _, tok := range []uint64{1, 2} {
		if !errors.Is(errs[tok], syscall.EBADF) {
			h.t.Errorf("token %d: error %v, want EBADF", tok, errs[tok])
		}
	}
	if errs[3] != nil {
		h.t.Errorf("token 3 (writable file): %v", errs[3])
	}
	h.checkFile(f, pattern(3, 4096))
}

// testErrorClosedFd: a write through a descriptor that is not open fails
// with EBADF and its token.
func testErrorClosedFd(h *harness) {
	fd, err := closedFd()
	if err != nil {
		h.t.Skip(err)
	}
	f := h.create("closedfd")
	f.fdOverride = fd
	h.write(f, pattern(1, 4096), 0, false, 1)
	h.write(f, pattern(2, 4096), 4096, true, 2)
	h.submit()
	errs, _ := h.reapAll(map[uint64]bool{1: true, 2: true})
	for tok, err := range errs {
		if !errors.Is(err, syscall.EBADF) {
			h.t.Errorf("token %d: error %v, want EBADF", tok, err)
		}
	}
}

// testManyInFlight: a thousand writes queued before anything is reaped (more
// than any reasonable queue depth, so engines must apply their bound
// themselves), some with sync.
func testManyInFlight(h *harness) {
	f := h.create("many")
	const n, size = 1024, 4096
	want := make([]byte, n*size)
	tokens := map[uint64]bool{}
	for i := range n {
		buf := pattern(uint64(i)+1000, size)
		copy(want[i*size:], buf)
		h.write(f, buf, int64(i*size), i%64 == 63, uint64(i))
		tokens[uint64(i)] = true
		if i%128 == 127 {
			h.submit()
		}
	}
	if got := h.e.InFlight(); got != n {
		h.t.Fatalf("InFlight = %d with %d written and none reaped", got, n)
	}
	errs, _ := h.reapAll(tokens)
	h.mustNil(errs)
	h.checkFile(f, want)
}

// testWakeFd: the wake descriptor becomes readable when a completion waits,
// and is not left readable once everything is reaped.
func testWakeFd(h *harness) {
	fd := h.e.WakeFd()
	if fd < 0 {
		h.t.Skipf("engine %s completes inside Submit (WakeFd -1)", h.e.Name())
	}
	f := h.create("wake")
	h.write(f, pattern(5, 8192), 0, true, 1)
	h.submit()
	if !readable(h.t, fd, opDeadline) {
		h.t.Fatalf("WakeFd %d not readable within %v of a submitted write", fd, opDeadline)
	}
	h.mustNil(must(h.reapAll(map[uint64]bool{1: true})))
	h.reap(false) // at most one spurious wake may remain; this Reap clears it
	if readable(h.t, fd, 0) {
		h.t.Fatalf("WakeFd %d still readable with nothing in flight", fd)
	}
}

// readable polls fd for POLLIN.
func readable(t *testing.T, fd int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		ms := int(time.Until(deadline) / time.Millisecond)
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, max(ms, 0))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		return n > 0 && pfd[0].Revents&unix.POLLIN != 0
	}
}

// testCloseInFlight: Close with submitted operations waits for them (the
// data is in the file afterwards) and the engine refuses work after Close.
func testCloseInFlight(h *harness) {
	f := h.create("close")
	var want []byte
	for i := range 32 {
		buf := pattern(uint64(i)+77, 64<<10)
		h.write(f, buf, int64(len(want)), i%2 == 0, uint64(i))
		want = append(want, buf...)
	}
	h.submit()
	h.closed = true
	h.within("Close", func() {
		if err := h.e.Close(); err != nil {
			h.t.Errorf("Close with ops in flight: %v", err)
		}
	})
	h.checkFile(f, want)
	if err := h.e.Write(f, []byte("late"), 0, false, 99); err == nil {
		h.t.Errorf("Write after Close succeeded")
	}
}
