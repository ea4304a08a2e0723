//go:build linux

package uring

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// skipUnavailable skips when the kernel refuses io_uring here.
func skipUnavailable(t testing.TB) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("io_uring refused here: %v", err)
	}
}

// newTestRing creates a ring closed at the end of the test.
func newTestRing(t *testing.T, opts RingOptions) *Ring {
	t.Helper()
	skipUnavailable(t)
	r, err := NewRing(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// rawFile opens a raw descriptor (no *os.File, so no finalizer).
func rawFile(t testing.TB, path string, flags int) int {
	t.Helper()
	fd, err := unix.Open(path, flags|unix.O_CLOEXEC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// reapN reaps until n CQEs arrived, waiting as needed (bounded by time).
func reapN(t *testing.T, r *Ring, n int) []CQE {
	t.Helper()
	out := make([]CQE, 0, n)
	buf := make([]CQE, 64)
	deadline := time.Now().Add(30 * time.Second)
	for len(out) < n {
		got, err := r.ReapCQEs(buf)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, buf[:got]...)
		if got == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("only %d of %d CQEs", len(out), n)
			}
			if _, err := r.SubmitAndWait(1); err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

func TestRingNop(t *testing.T) {
	for _, separate := range []bool{false, true} {
		t.Run(map[bool]string{false: "single-mmap", true: "separate-mmap"}[separate], func(t *testing.T) {
			r := newTestRing(t, RingOptions{Entries: 32, separateMmap: separate})
			if r.SingleMmap() == separate {
				t.Fatalf("SingleMmap = %v with separateMmap %v", r.SingleMmap(), separate)
			}
			for round := range 3 {
				for i := range 32 {
					sqe := r.GetSQE()
					if sqe == nil {
						t.Fatalf("round %d: no SQE at %d of 32", round, i)
					}
					sqe.PrepNop()
					sqe.SetUserData(uint64(round*1000 + i))
				}
				if n, err := r.Submit(); err != nil || n != 32 {
					t.Fatalf("Submit = %d, %v", n, err)
				}
				seen := map[uint64]bool{}
				for _, c := range reapN(t, r, 32) {
					if c.Res != 0 || seen[c.UserData] || c.UserData/1000 != uint64(round) {
						t.Fatalf("bad CQE %+v", c)
					}
					seen[c.UserData] = true
				}
			}
			if r.CQReady() != 0 || r.SQPending() != 0 {
				t.Fatalf("CQReady %d SQPending %d after round trips", r.CQReady(), r.SQPending())
			}
		})
	}
}

// prepChain prepares write(buf at off) -> fdatasync on fd.
func prepChain(t *testing.T, r *Ring, fd int, buf []byte, off int64, ud uint64) {
	t.Helper()
	w, s := r.GetSQE(), r.GetSQE()
	if w == nil || s == nil {
		t.Fatal("SQ full")
	}
	w.PrepWrite(fd, buf, off)
	w.SetFlags(SQEIOLink)
	w.SetUserData(ud)
	s.PrepFsync(fd, FsyncDatasync)
	s.SetUserData(ud + 1)
}

func TestRingWriteFsyncChains(t *testing.T) {
	r := newTestRing(t, RingOptions{Entries: 64})
	path := filepath.Join(t.TempDir(), "f")
	fd := rawFile(t, path, unix.O_RDWR|unix.O_CREAT)
	const chains, size = 16, 64 << 10
	bufs := make([][]byte, chains)
	var want []byte
	for i := range bufs {
		bufs[i] = bytes.Repeat([]byte{byte('a' + i)}, size)
		want = append(want, bufs[i]...)
		prepChain(t, r, fd, bufs[i], int64(i*size), uint64(i*2))
	}
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	for _, c := range reapN(t, r, 2*chains) {
		wantRes := int32(size)
		if c.UserData%2 == 1 {
			wantRes = 0
		}
		if c.Res != wantRes {
			t.Fatalf("CQE %+v, want res %d", c, wantRes)
		}
	}
	runtime.KeepAlive(bufs)
	got, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("file content wrong (%d bytes, err %v)", len(got), err)
	}
}

func TestRingChainCancelledByFailedWrite(t *testing.T) {
	r := newTestRing(t, RingOptions{Entries: 8})
	path := filepath.Join(t.TempDir(), "ro")
	rawFile(t, path, unix.O_RDWR|unix.O_CREAT)
	ro := rawFile(t, path, unix.O_RDONLY)
	buf := make([]byte, 4096)
	prepChain(t, r, ro, buf, 0, 10)
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	res := map[uint64]int32{}
	for _, c := range reapN(t, r, 2) {
		res[c.UserData] = c.Res
	}
	runtime.KeepAlive(buf)
	if res[10] != -int32(unix.EBADF) || res[11] != -int32(unix.ECANCELED) {
		t.Fatalf("write res %d (want -EBADF), fsync res %d (want -ECANCELED)", res[10], res[11])
	}
}

// fileSizeLimit finds the file system's largest file offset (s_maxbytes) by
// bisecting pwrite: writes at or past it fail with EFBIG, and a write that
// crosses it is cut short there. It skips the test when no limit is found
// or a file-size rlimit would turn EFBIG into SIGXFSZ.
func fileSizeLimit(t testing.TB, fd int) int64 {
	t.Helper()
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_FSIZE, &rl); err != nil || rl.Cur != unix.RLIM_INFINITY {
		t.Skip("RLIMIT_FSIZE is set; EFBIG would come with SIGXFSZ")
	}
	one := []byte{1}
	ok := func(off int64) bool {
		_, err := unix.Pwrite(fd, one, off)
		if err != nil && err != unix.EFBIG {
			t.Skipf("pwrite at %d: %v", off, err)
		}
		return err == nil
	}
	lo, hi := int64(0), int64(math.MaxInt64-1)
	if !ok(lo) || ok(hi) {
		t.Skip("file system has no file size limit below 2^63")
	}
	for hi-lo > 1 { // invariant: ok(lo) && !ok(hi)
		mid := lo + (hi-lo)/2
		if ok(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	if err := unix.Ftruncate(fd, 0); err != nil {
		t.Fatal(err)
	}
	return hi
}

func TestRingChainCancelledByShortWrite(t *testing.T) {
	r := newTestRing(t, RingOptions{Entries: 8})
	fd := rawFile(t, filepath.Join(t.TempDir(), "big"), unix.O_RDWR|unix.O_CREAT)
	limit := fileSizeLimit(t, fd)
	buf := make([]byte, 4096)
	prepChain(t, r, fd, buf, limit-100, 20)
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	res := map[uint64]int32{}
	for _, c := range reapN(t, r, 2) {
		res[c.UserData] = c.Res
	}
	runtime.KeepAlive(buf)
	if res[20] != 100 || res[21] != -int32(unix.ECANCELED) {
		t.Fatalf("write res %d (want 100: short), fsync res %d (want -ECANCELED)", res[20], res[21])
	}
}

// readable polls fd for POLLIN for up to d.
func readable(t testing.TB, fd int, d time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(pfd, max(int(time.Until(deadline)/time.Millisecond), 0))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
}

func TestRingEventfd(t *testing.T) {
	r := newTestRing(t, RingOptions{Entries: 8})
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(efd)
	if err := r.RegisterEventfd(efd); err != nil {
		t.Fatal(err)
	}
	if readable(t, efd, 0) {
		t.Fatal("eventfd readable before any CQE")
	}
	r.GetSQE().PrepNop()
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	if !readable(t, efd, 10*time.Second) {
		t.Fatal("eventfd not signalled by a CQE")
	}
	var b [8]byte
	if _, err := unix.Read(efd, b[:]); err != nil {
		t.Fatal(err)
	}
	reapN(t, r, 1)
	if err := r.UnregisterEventfd(); err != nil {
		t.Fatal(err)
	}
	r.GetSQE().PrepNop()
	if _, err := r.SubmitAndWait(1); err != nil {
		t.Fatal(err)
	}
	reapN(t, r, 1)
	if readable(t, efd, 0) {
		t.Fatal("eventfd signalled after UnregisterEventfd")
	}
}

func TestRingPollAddWakesOnEventfd(t *testing.T) {
	r := newTestRing(t, RingOptions{Entries: 8})
	inbox, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(inbox)
	sqe := r.GetSQE()
	sqe.PrepPollAdd(inbox, unix.POLLIN)
	sqe.SetUserData(7)
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	if n := r.CQReady(); n != 0 {
		t.Fatalf("poll completed before the eventfd was written (%d CQEs)", n)
	}
	if _, err := unix.Write(inbox, []byte{1, 0, 0, 0, 0, 0, 0, 0}); err != nil {
		t.Fatal(err)
	}
	c := reapN(t, r, 1)[0]
	if c.UserData != 7 || c.Res&unix.POLLIN == 0 {
		t.Fatalf("CQE %+v, want user data 7 with POLLIN", c)
	}
}

func TestRingQueueFull(t *testing.T) {
	r := newTestRing(t, RingOptions{Entries: 8})
	if r.SQEntries() != 8 || r.CQEntries() != 16 {
		t.Fatalf("SQ %d CQ %d, want 8 and 16", r.SQEntries(), r.CQEntries())
	}
	for i := range 8 {
		sqe := r.GetSQE()
		if sqe == nil {
			t.Fatalf("SQE %d missing", i)
		}
		sqe.PrepNop()
	}
	if r.GetSQE() != nil || r.SQSpace() != 0 || r.SQPending() != 8 {
		t.Fatalf("full SQ: space %d pending %d", r.SQSpace(), r.SQPending())
	}
	if n, err := r.Submit(); err != nil || n != 8 {
		t.Fatalf("Submit = %d, %v", n, err)
	}
	if r.SQSpace() != 8 || r.GetSQE() == nil {
		t.Fatalf("SQ not free after Submit: space %d", r.SQSpace())
	}
	r.GetSQE().PrepNop()
	if _, err := r.Submit(); err != nil {
		t.Fatal(err)
	}
	reapN(t, r, 10)
}

// TestRingCQOverflow posts more CQEs than the CQ holds without reaping: the
// kernel (IORING_FEAT_NODROP) keeps the excess and ReapCQEs flushes it.
func TestRingCQOverflow(t *testing.T) {
	r := newTestRing(t, RingOptions{Entries: 4}) // CQ of 8
	if r.features&featNoDrop == 0 {
		t.Skip("kernel without IORING_FEAT_NODROP")
	}
	submitted := 0
	for round := 0; round < 5; round++ {
		for range 4 {
			sqe := r.GetSQE()
			sqe.PrepNop()
			sqe.SetUserData(uint64(submitted))
			submitted++
		}
		if _, err := r.Submit(); err != nil {
			if errors.Is(err, unix.EBUSY) { // older kernels refuse while overflowed
				break
			}
			t.Fatal(err)
		}
	}
	submitted -= r.SQPending()
	if submitted <= r.CQEntries() {
		t.Fatalf("only %d NOPs submitted; the test needs more than %d", submitted, r.CQEntries())
	}
	got := reapN(t, r, submitted)
	for i, c := range got {
		if c.UserData != uint64(i) {
			t.Fatalf("CQE %d has user data %d (order lost in overflow)", i, c.UserData)
		}
	}
}

func TestRingClose(t *testing.T) {
	r := newTestRing(t, RingOptions{Entries: 4})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Close = %v", err)
	}
	if r.GetSQE() != nil {
		t.Fatal("GetSQE after Close returned an entry")
	}
	if _, err := r.Submit(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Submit after Close = %v", err)
	}
	if _, err := r.ReapCQEs(make([]CQE, 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("ReapCQEs after Close = %v", err)
	}
	if err := r.RegisterEventfd(0); !errors.Is(err, ErrClosed) {
		t.Fatalf("RegisterEventfd after Close = %v", err)
	}
}

func TestRingEntriesBound(t *testing.T) {
	skipUnavailable(t)
	if _, err := NewRing(RingOptions{Entries: RingEntriesMax + 1}); err == nil {
		t.Fatal("NewRing accepted more than RingEntriesMax entries")
	}
}

// TestRingSingleIssuer pins down FINDINGS' warning: a SINGLE_ISSUER ring
// works from its creating thread and refuses (EEXIST) submissions from any
// other.
func TestRingSingleIssuer(t *testing.T) {
	skipUnavailable(t)
	type result struct {
		r   *Ring
		err error
	}
	created := make(chan result)
	release := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		r, err := NewRing(RingOptions{Entries: 4, SingleIssuer: true})
		if err == nil {
			r.GetSQE().PrepNop()
			_, err = r.SubmitAndWait(1)
		}
		created <- result{r, err}
		<-release // keep this thread busy (locked) while the other submits
	}()
	res := <-created
	defer close(release)
	if res.err != nil {
		t.Skipf("SINGLE_ISSUER unavailable: %v", res.err)
	}
	defer res.r.Close()
	reapN(t, res.r, 1)
	runtime.LockOSThread() // a different thread from the creator's
	defer runtime.UnlockOSThread()
	res.r.GetSQE().PrepNop()
	if _, err := res.r.Submit(); !errors.Is(err, unix.EEXIST) {
		t.Fatalf("submit from another thread = %v, want EEXIST", err)
	}
}

func TestSetupErrorClassification(t *testing.T) {
	for _, c := range []struct {
		errno       unix.Errno
		single      bool
		unavailable bool
	}{
		{unix.ENOSYS, false, true},
		{unix.EPERM, false, true},
		{unix.EACCES, false, true},
		{unix.EINVAL, true, false},
		{unix.EINVAL, false, false},
		{unix.ENOMEM, false, false},
	} {
		err := setupError(c.errno, c.single)
		if errors.Is(err, ErrUnavailable) != c.unavailable || !errors.Is(err, c.errno) {
			t.Errorf("setupError(%v, %v) = %v: unavailable %v, want %v", c.errno, c.single, err,
				errors.Is(err, ErrUnavailable), c.unavailable)
		}
		var ue *UnavailableError
		if c.unavailable && !errors.As(err, &ue) {
			t.Errorf("setupError(%v) is not an *UnavailableError", c.errno)
		}
	}
}

func TestAvailable(t *testing.T) {
	err := Available()
	if err != nil && !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Available() = %v, which does not match ErrUnavailable", err)
	}
	if err2 := Available(); err2 != err {
		t.Fatalf("Available changed its answer: %v then %v", err, err2)
	}
	t.Logf("Available() = %v", err)
}

func TestRingIOWQLimits(t *testing.T) {
	r := newTestRing(t, RingOptions{Entries: 4})
	if _, _, err := r.SetIOWQMaxWorkers(3, 0); err != nil {
		t.Skipf("IORING_REGISTER_IOWQ_MAX_WORKERS: %v", err)
	}
	b, _, err := r.SetIOWQMaxWorkers(0, 0) // 0: query only
	if err != nil || b != 3 {
		t.Fatalf("bounded limit reads back %d, %v; want 3", b, err)
	}
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	if err := r.RegisterIOWQAffinity(&all); err != nil {
		t.Fatal(err)
	}
}
