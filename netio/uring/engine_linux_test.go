//go:build linux

package uring

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/corestream/corestream/segment/vfs"
)

// TestOpSettle drives the pure op state machine through CQE sequences.
func TestOpSettle(t *testing.T) {
	type cqe struct {
		role int
		res  int32
	}
	type step struct {
		cqes     []cqe
		wantDone bool
		wantErr  error // matched with errors.Is; nil means no error
		// syncFailed: the error must be a *vfs.SyncError (the sync ran and
		// failed), never for a write failure
		syncFailed bool
		// what the next submission must be when not done
		nextLen  int
		nextSync bool
	}
	canceled := -int32(unix.ECANCELED)
	cases := []struct {
		name  string
		size  int
		sync  bool
		write bool
		limit int
		steps []step
	}{
		{"write ok", 100, false, true, 1 << 20, []step{
			{cqes: []cqe{{roleWrite, 100}}, wantDone: true},
		}},
		{"write+sync ok, sync CQE first", 100, true, true, 1 << 20, []step{
			{cqes: []cqe{{roleSync, 0}, {roleWrite, 100}}, wantDone: true},
		}},
		{"failed write cancels sync: write error reported", 100, true, true, 1 << 20, []step{
			{cqes: []cqe{{roleWrite, -int32(unix.ENOSPC)}, {roleSync, canceled}}, wantDone: true, wantErr: syscall.ENOSPC},
		}},
		{"sync fails", 100, true, true, 1 << 20, []step{
			{cqes: []cqe{{roleWrite, 100}, {roleSync, -int32(unix.EIO)}}, wantDone: true, wantErr: syscall.EIO, syncFailed: true},
		}},
		{"short write: cancelled sync ignored, remainder resubmitted with sync", 100, true, true, 1 << 20, []step{
			{cqes: []cqe{{roleWrite, 60}, {roleSync, canceled}}, nextLen: 40, nextSync: true},
			{cqes: []cqe{{roleWrite, 40}, {roleSync, 0}}, wantDone: true},
		}},
		{"short write then error on the remainder", 100, true, true, 1 << 20, []step{
			{cqes: []cqe{{roleWrite, 60}, {roleSync, canceled}}, nextLen: 40, nextSync: true},
			{cqes: []cqe{{roleWrite, -int32(unix.EFBIG)}, {roleSync, canceled}}, wantDone: true, wantErr: syscall.EFBIG},
		}},
		{"zero progress is a short write error", 100, false, true, 1 << 20, []step{
			{cqes: []cqe{{roleWrite, 0}}, wantDone: true, wantErr: io.ErrShortWrite},
		}},
		{"pieces: sync only on the last", 250, true, true, 100, []step{
			{cqes: []cqe{{roleWrite, 100}}, nextLen: 100},
			{cqes: []cqe{{roleWrite, 100}}, nextLen: 50, nextSync: true},
			{cqes: []cqe{{roleWrite, 50}, {roleSync, 0}}, wantDone: true},
		}},
		{"piece cut short", 250, false, true, 100, []step{
			{cqes: []cqe{{roleWrite, 30}}, nextLen: 100},
			{cqes: []cqe{{roleWrite, 100}}, nextLen: 100},
			{cqes: []cqe{{roleWrite, 100}}, nextLen: 20},
			{cqes: []cqe{{roleWrite, 20}}, wantDone: true},
		}},
		{"empty write with sync", 0, true, true, 100, []step{
			{cqes: []cqe{{roleWrite, 0}, {roleSync, 0}}, wantDone: true},
		}},
		{"lone sync", 0, true, false, 100, []step{
			{cqes: []cqe{{roleSync, 0}}, wantDone: true},
		}},
		{"sync says ENOSPC: still a sync failure, not retryable", 100, true, true, 1 << 20, []step{
			{cqes: []cqe{{roleWrite, 100}, {roleSync, -int32(unix.ENOSPC)}}, wantDone: true, wantErr: syscall.ENOSPC, syncFailed: true},
		}},
		{"lone sync fails", 0, true, false, 100, []step{
			{cqes: []cqe{{roleSync, -int32(unix.EIO)}}, wantDone: true, wantErr: syscall.EIO, syncFailed: true},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := &op{buf: make([]byte, c.size), write: c.write, sync: c.sync, limit: c.limit, off: 1000}
			n, s := o.nextPiece()
			o.start(n, s)
			for i, st := range c.steps {
				if o.pending != len(st.cqes) {
					t.Fatalf("step %d: %d CQEs pending, script has %d", i, o.pending, len(st.cqes))
				}
				for j, q := range st.cqes {
					if last := o.record(q.role, q.res); last != (j == len(st.cqes)-1) {
						t.Fatalf("step %d CQE %d: record said last=%v", i, j, last)
					}
				}
				done, err := o.settle()
				if done != st.wantDone {
					t.Fatalf("step %d: done %v, want %v", i, done, st.wantDone)
				}
				if (st.wantErr == nil) != (err == nil) || (err != nil && !errors.Is(err, st.wantErr)) {
					t.Fatalf("step %d: err %v, want %v", i, err, st.wantErr)
				}
				var se *vfs.SyncError
				if isSync := errors.As(err, &se); isSync != (err != nil && st.syncFailed) {
					t.Fatalf("step %d: err %v wrapped in *vfs.SyncError: %v, want %v", i, err, isSync, st.syncFailed)
				}
				if st.syncFailed && vfs.IsNoSpace(err) {
					t.Fatalf("step %d: failed sync %v classified as retryable no-space", i, err)
				}
				if done {
					if i != len(c.steps)-1 {
						t.Fatalf("done at step %d of %d", i, len(c.steps))
					}
					return
				}
				n, s := o.nextPiece()
				if n != st.nextLen || s != st.nextSync {
					t.Fatalf("step %d: next piece (%d, sync %v), want (%d, %v)", i, n, s, st.nextLen, st.nextSync)
				}
				o.start(n, s)
			}
			t.Fatal("script ended before the op was done")
		})
	}
}

// TestOpShortWritesBounded: an op that keeps being cut short gives up.
func TestOpShortWritesBounded(t *testing.T) {
	o := &op{buf: make([]byte, 1000), write: true, limit: 1 << 20}
	for i := 0; ; i++ {
		n, s := o.nextPiece()
		o.start(n, s)
		o.record(roleWrite, 1)
		done, err := o.settle()
		if done {
			if !errors.Is(err, io.ErrShortWrite) || i != shortWritesMax {
				t.Fatalf("gave up after %d short writes with %v", i+1, err)
			}
			var oe *OpError
			if !errors.As(err, &oe) || oe.Off != int64(shortWritesMax+1) {
				t.Fatalf("error %v does not carry the remainder's offset", err)
			}
			return
		}
	}
}

// testFile is a raw-descriptor vfs.File for the engine's own tests.
type testFile struct {
	fd   int
	name string
}

func (f *testFile) ReadAt(p []byte, off int64) (int, error)  { return unix.Pread(f.fd, p, off) }
func (f *testFile) WriteAt(p []byte, off int64) (int, error) { return unix.Pwrite(f.fd, p, off) }
func (f *testFile) Close() error                             { return unix.Close(f.fd) }
func (f *testFile) Sync() error                              { return unix.Fdatasync(f.fd) }
func (f *testFile) Truncate(size int64) error                { return unix.Ftruncate(f.fd, size) }
func (f *testFile) Size() (int64, error)                     { return 0, errors.ErrUnsupported }
func (f *testFile) Fd() uintptr                              { return uintptr(f.fd) }
func (f *testFile) Name() string                             { return f.name }
func (f *testFile) Preallocate(off, n int64, keep bool) error {
	mode := uint32(0)
	if keep {
		mode = unix.FALLOC_FL_KEEP_SIZE
	}
	return unix.Fallocate(f.fd, mode, off, n)
}

// memFile is a vfs.File without a descriptor.
type memFile struct{ testFile }

func (memFile) Fd() uintptr { return vfs.InvalidFd }

func newTestFile(t testing.TB, dir, name string) *testFile {
	t.Helper()
	path := filepath.Join(dir, name)
	return &testFile{fd: rawFile(t, path, unix.O_RDWR|unix.O_CREAT|unix.O_TRUNC), name: path}
}

func newTestEngine(t testing.TB, opts Options) *Engine {
	t.Helper()
	skipUnavailable(t)
	e, err := NewEngine(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// reapAllEngine reaps until n operations settled.
func reapAllEngine(t *testing.T, e *Engine, n int) map[uint64]error {
	t.Helper()
	got := map[uint64]error{}
	for len(got) < n {
		if _, err := e.Reap(true, func(tok uint64, err error) {
			if _, dup := got[tok]; dup {
				t.Fatalf("token %d twice", tok)
			}
			got[tok] = err
		}); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

// TestEnginePieces writes buffers larger than the piece limit, so each
// operation is resubmitted through the kernel several times (the path short
// writes take) and completes once.
func TestEnginePieces(t *testing.T) {
	e := newTestEngine(t, Options{QueueDepth: 4, pieceBytes: 4096, InlineWriteMax: -1})
	f := newTestFile(t, t.TempDir(), "pieces")
	a, b := bytes.Repeat([]byte("a"), 10000), bytes.Repeat([]byte("b"), 8192)
	for i, w := range []struct {
		buf  []byte
		off  int64
		sync bool
	}{{a, 0, true}, {b, 10000, false}} {
		if err := e.Write(f, w.buf, w.off, w.sync, uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Submit(); err != nil {
		t.Fatal(err)
	}
	for tok, err := range reapAllEngine(t, e, 2) {
		if err != nil {
			t.Fatalf("token %d: %v", tok, err)
		}
	}
	got, _ := os.ReadFile(f.name)
	if !bytes.Equal(got, append(append([]byte{}, a...), b...)) {
		t.Fatalf("file has %d bytes, want the two buffers", len(got))
	}
	if e.InFlight() != 0 || e.active != 0 || e.cqesOut != 0 {
		t.Fatalf("after reaping: InFlight %d active %d cqesOut %d", e.InFlight(), e.active, e.cqesOut)
	}
}

// TestEngineShortWrite makes the kernel cut a write short for real (it
// crosses the file system's size limit): the engine resubmits the remainder,
// which fails with EFBIG, and reports one error at the remainder's offset.
// The write without fdatasync runs both through the ring and inline.
func TestEngineShortWrite(t *testing.T) {
	for _, inline := range []int{-1, 0} {
		e := newTestEngine(t, Options{QueueDepth: 4, InlineWriteMax: inline})
		f := newTestFile(t, t.TempDir(), "big")
		limit := fileSizeLimit(t, f.fd)
		for _, sync := range []bool{false, true} {
			if err := e.Write(f, make([]byte, 4096), limit-100, sync, 1); err != nil {
				t.Fatal(err)
			}
			if err := e.Submit(); err != nil {
				t.Fatal(err)
			}
			err := reapAllEngine(t, e, 1)[1]
			var oe *OpError
			if !errors.Is(err, syscall.EFBIG) || !errors.As(err, &oe) || oe.Off != limit || oe.Op != "write" {
				t.Fatalf("inline %d, sync %v: error %v, want a write EFBIG at offset %d", inline, sync, err, limit)
			}
		}
	}
}

// TestEngineInlineWrites: a small write without fdatasync is in the file
// when Write returns and completes at the next Reap without a Submit or a
// kernel round; a larger one, or one with a sync, goes to the ring.
func TestEngineInlineWrites(t *testing.T) {
	e := newTestEngine(t, Options{QueueDepth: 4, InlineWriteMax: 1024})
	f := newTestFile(t, t.TempDir(), "inline")
	small := bytes.Repeat([]byte("s"), 1024)
	if err := e.Write(f, small, 0, false, 7); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(f.name); !bytes.Equal(got, small) {
		t.Fatalf("file has %d bytes right after Write, want the inline write's 1024", len(got))
	}
	if e.active != 0 || e.InFlight() != 1 {
		t.Fatalf("active %d InFlight %d: the inline write must hold no ring slot, yet count as in flight", e.active, e.InFlight())
	}
	var toks []uint64
	n, err := e.Reap(false, func(tok uint64, err error) {
		if err != nil {
			t.Errorf("token %d: %v", tok, err)
		}
		toks = append(toks, tok)
	})
	if err != nil || n != 1 || len(toks) != 1 || toks[0] != 7 {
		t.Fatalf("Reap without Submit: n %d err %v tokens %v, want token 7", n, err, toks)
	}
	big := bytes.Repeat([]byte("b"), 1025)
	if err := e.Write(f, big, 1024, false, 8); err != nil {
		t.Fatal(err)
	}
	if err := e.Write(f, small, 2049, true, 9); err != nil {
		t.Fatal(err)
	}
	if e.active != 2 {
		t.Fatalf("active %d, want the large write and the synced one in the ring", e.active)
	}
	if err := e.Submit(); err != nil {
		t.Fatal(err)
	}
	for tok, err := range reapAllEngine(t, e, 2) {
		if err != nil {
			t.Fatalf("token %d: %v", tok, err)
		}
	}
	if got, _ := os.ReadFile(f.name); len(got) != 3073 {
		t.Fatalf("file has %d bytes, want 3073", len(got))
	}
}

// TestEngineBlocksAtQueueDepth: with every slot busy Write waits for a
// completion and keeps it; the kernel never holds more than QueueDepth.
func TestEngineBlocksAtQueueDepth(t *testing.T) {
	e := newTestEngine(t, Options{QueueDepth: 2})
	f := newTestFile(t, t.TempDir(), "depth")
	const n = 50
	for i := range n {
		if err := e.Write(f, bytes.Repeat([]byte{byte(i)}, 512), int64(i)*512, i%10 == 0, uint64(i)); err != nil {
			t.Fatal(err)
		}
		if e.active > 2 || e.cqesOut > 4 {
			t.Fatalf("active %d cqesOut %d above the bound", e.active, e.cqesOut)
		}
	}
	if e.InFlight() != n {
		t.Fatalf("InFlight %d, want %d", e.InFlight(), n)
	}
	if err := e.Submit(); err != nil {
		t.Fatal(err)
	}
	if got := reapAllEngine(t, e, n); len(got) != n {
		t.Fatalf("%d completions", len(got))
	}
}

// TestEngineWriteFromCallback: a Reap callback may queue and submit the
// next write (how a log starts its next chain when one completes).
func TestEngineWriteFromCallback(t *testing.T) {
	e := newTestEngine(t, Options{QueueDepth: 2})
	f := newTestFile(t, t.TempDir(), "chain")
	const n = 40
	next := uint64(0)
	var fn func(tok uint64, err error)
	issue := func() {
		if err := e.Write(f, bytes.Repeat([]byte{byte(next)}, 1000), int64(next)*1000, next%8 == 7, next); err != nil {
			t.Fatal(err)
		}
		next++
	}
	done := 0
	fn = func(tok uint64, err error) {
		if err != nil {
			t.Fatalf("token %d: %v", tok, err)
		}
		done++
		for next < n && e.InFlight() < 3 {
			issue()
		}
		if err := e.Submit(); err != nil {
			t.Fatal(err)
		}
	}
	issue()
	issue()
	if err := e.Submit(); err != nil {
		t.Fatal(err)
	}
	for done < n {
		if _, err := e.Reap(true, fn); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := os.ReadFile(f.name)
	if len(got) != n*1000 || got[len(got)-1] != n-1 {
		t.Fatalf("file has %d bytes", len(got))
	}
}

func TestEngineRefusals(t *testing.T) {
	e := newTestEngine(t, Options{QueueDepth: 2})
	f := newTestFile(t, t.TempDir(), "f")
	if err := e.Write(&memFile{}, []byte("x"), 0, false, 1); !errors.Is(err, ErrNoFd) {
		t.Fatalf("write to a descriptor-less file = %v, want ErrNoFd", err)
	}
	if err := e.Sync(&memFile{}, 1); !errors.Is(err, ErrNoFd) {
		t.Fatalf("sync of a descriptor-less file = %v, want ErrNoFd", err)
	}
	if err := e.Write(f, []byte("x"), -1, false, 1); !errors.Is(err, ErrBadOffset) {
		t.Fatalf("write at -1 = %v, want ErrBadOffset", err)
	}
	if e.InFlight() != 0 {
		t.Fatalf("refused writes left InFlight %d", e.InFlight())
	}
	if _, err := NewEngine(Options{QueueDepth: QueueDepthMax + 1}); err == nil {
		t.Fatal("NewEngine accepted QueueDepth above QueueDepthMax")
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close = %v", err)
	}
	if _, err := e.Reap(false, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Reap after Close = %v", err)
	}
	if err := e.Submit(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Submit after Close = %v", err)
	}
}

// TestEngineSingleIssuer runs an engine with IORING_SETUP_SINGLE_ISSUER from
// a goroutine locked to its thread, as a shard would.
func TestEngineSingleIssuer(t *testing.T) {
	skipUnavailable(t)
	f := newTestFile(t, t.TempDir(), "si")
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		e, err := NewEngine(Options{QueueDepth: 4, SingleIssuer: true})
		if err != nil {
			errc <- err
			return
		}
		defer e.Close()
		for i := range 8 {
			if err := e.Write(f, []byte("single issuer"), int64(i)*13, true, uint64(i)); err != nil {
				errc <- err
				return
			}
		}
		if err := e.Submit(); err != nil {
			errc <- err
			return
		}
		for reaped := 0; reaped < 8; {
			n, err := e.Reap(true, func(_ uint64, err error) {
				if err != nil {
					errc <- err
				}
			})
			if err != nil {
				errc <- err
				return
			}
			reaped += n
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestEngineOffHeapBuffer writes from mmapped memory, as the log's buffer
// pool does: pinning such a pointer is a no-op and must not fail.
func TestEngineOffHeapBuffer(t *testing.T) {
	e := newTestEngine(t, Options{QueueDepth: 2})
	f := newTestFile(t, t.TempDir(), "mmap")
	buf, err := unix.Mmap(-1, 0, 1<<16, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	copy(buf, bytes.Repeat([]byte("off-heap "), len(buf)/9))
	if err := e.Write(f, buf, 0, true, 1); err != nil {
		t.Fatal(err)
	}
	if err := e.Submit(); err != nil {
		t.Fatal(err)
	}
	if err := reapAllEngine(t, e, 1)[1]; err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(f.name)
	if !bytes.Equal(got, buf) {
		t.Fatal("file differs from the mmapped buffer")
	}
}

// TestEngineWorkerAffinity: with WorkerCPUs the kernel's io-wq workers of
// a pinned submitter run on the given CPUs, not on the submitter's (the
// FINDINGS pitfall: workers inherit the submitter's affinity).
func TestEngineWorkerAffinity(t *testing.T) {
	skipUnavailable(t)
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil || all.Count() < 2 {
		t.Skip("needs two CPUs")
	}
	var cpus []int
	for c := 0; len(cpus) < 2; c++ {
		if all.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	f := newTestFile(t, t.TempDir(), "aff")
	type result struct {
		tid     int
		allowed string
		err     error
	}
	res := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var pin unix.CPUSet
		pin.Set(cpus[0])
		if err := unix.SchedSetaffinity(0, &pin); err != nil {
			res <- result{err: err}
			return
		}
		// This thread may have submitted in earlier tests: its io-wq (one
		// per thread, shared by rings) may have idle workers that predate
		// the registration and keep their old mask. Judge only new ones.
		tid := unix.Gettid()
		old := workerTasks(tid)
		e, err := NewEngine(Options{QueueDepth: 16, WorkerCPUs: cpus[1:2], WorkersMax: 8})
		if err != nil {
			res <- result{err: err}
			return
		}
		defer e.Close()
		// fsyncs always go to io-wq workers, and sixteen of them at once
		// keep the idle ones busy so that new workers start.
		for i := range 16 {
			if err := e.Write(f, []byte("aff"), int64(i)*3, true, uint64(i)); err != nil {
				res <- result{err: err}
				return
			}
		}
		if err := e.Submit(); err != nil {
			res <- result{err: err}
			return
		}
		allowed := workerAffinity(tid, old) // while the workers are alive
		for e.InFlight() > 0 {
			if _, err := e.Reap(true, func(uint64, error) {}); err != nil {
				res <- result{err: err}
				return
			}
		}
		if allowed == "" {
			allowed = workerAffinity(tid, old)
		}
		res <- result{tid: tid, allowed: allowed}
	}()
	r := <-res
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.allowed == "" {
		t.Skip("no new io-wq worker thread seen")
	}
	if want := fmt.Sprint(cpus[1]); r.allowed != want {
		t.Fatalf("io-wq worker of thread %d allowed on CPUs %q, want %q", r.tid, r.allowed, want)
	}
}

// workerTasks returns the task ids of the io-wq workers ("iou-wrk-<tid>")
// of submitter thread tid.
func workerTasks(tid int) map[string]bool {
	ids := map[string]bool{}
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, task := range tasks {
		comm, _ := os.ReadFile("/proc/self/task/" + task.Name() + "/comm")
		if strings.TrimSpace(string(comm)) == fmt.Sprintf("iou-wrk-%d", tid) {
			ids[task.Name()] = true
		}
	}
	return ids
}

// workerAffinity returns Cpus_allowed_list of one io-wq worker of submitter
// tid that is not in old, or "" if there is none.
func workerAffinity(tid int, old map[string]bool) string {
	for task := range workerTasks(tid) {
		if old[task] {
			continue
		}
		status, _ := os.ReadFile("/proc/self/task/" + task + "/status")
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
				return strings.TrimSpace(v)
			}
		}
	}
	return ""
}
