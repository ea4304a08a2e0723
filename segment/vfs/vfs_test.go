package vfs

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"path"
	"syscall"
	"testing"
)

// fsConformance checks the behaviour every FS must share.
func fsConformance(t *testing.T, fsys FS, dir string) {
	t.Helper()
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := path.Join(dir, "a.log")
	f, err := fsys.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("hello world"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("W"), 6); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 11)
	if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "hello World" {
		t.Fatalf("ReadAt = %q, %v", buf, err)
	}
	if n, err := f.ReadAt(make([]byte, 20), 5); n != 6 || err != io.EOF {
		t.Fatalf("short ReadAt = %d, %v; want 6, EOF", n, err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Preallocate(0, 4096, true); err != nil {
		t.Fatal(err)
	}
	if sz, _ := f.Size(); sz != 11 {
		t.Fatalf("size after keep-size preallocate = %d, want 11", sz)
	}
	if err := f.Preallocate(0, 100, false); err != nil {
		t.Fatal(err)
	}
	if sz, _ := f.Size(); sz != 100 {
		t.Fatalf("size after extending preallocate = %d, want 100", sz)
	}
	tail := make([]byte, 89)
	if _, err := f.ReadAt(tail, 11); err != nil || !bytes.Equal(tail, make([]byte, 89)) {
		t.Fatalf("extended bytes not zero: %v", err)
	}
	if err := f.Truncate(5); err != nil {
		t.Fatal(err)
	}
	if sz, _ := f.Size(); sz != 5 {
		t.Fatalf("size after truncate = %d", sz)
	}
	if f.Name() != p {
		t.Fatalf("Name = %q", f.Name())
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err == nil {
		t.Fatal("second Close succeeded")
	}
	q := path.Join(dir, "b.log")
	if err := fsys.Rename(p, q); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.Open(p); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("old name after rename: %v", err)
	}
	names, err := fsys.List(dir)
	if err != nil || len(names) != 1 || names[0] != "b.log" {
		t.Fatalf("List = %v, %v", names, err)
	}
	if st, err := fsys.Stat(q); err != nil || st.Size() != 5 {
		t.Fatalf("Stat = %v, %v", st, err)
	}
	r, err := fsys.Open(q)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.WriteAt([]byte("x"), 0); err == nil {
		t.Fatal("write through read-only handle succeeded")
	}
	r.Close()
	if err := fsys.SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := fsys.Remove(q); err != nil {
		t.Fatal(err)
	}
	if _, err := fsys.OpenReadWrite(q); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("open after remove: %v", err)
	}
}

func TestOSConformance(t *testing.T) { fsConformance(t, OS(), t.TempDir()) }

func TestMemConformance(t *testing.T) { fsConformance(t, NewMem(), "/data/p0") }

func TestOSFdIsReal(t *testing.T) {
	f, err := OS().Create(path.Join(t.TempDir(), "x"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Fd() == InvalidFd {
		t.Fatal("OS file has no descriptor")
	}
	if NewMemFile(t).Fd() != InvalidFd {
		t.Fatal("memory file claims a descriptor")
	}
}

func NewMemFile(t *testing.T) File {
	m := NewMem()
	f, err := m.Create("/f")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func mustWrite(t *testing.T, f File, s string, off int64) {
	t.Helper()
	if _, err := f.WriteAt([]byte(s), off); err != nil {
		t.Fatal(err)
	}
}

func contents(t *testing.T, m *MemFS, p string) (string, bool) {
	t.Helper()
	f, err := m.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sz, _ := f.Size()
	b := make([]byte, sz)
	if _, err := f.ReadAt(b, 0); err != nil && err != io.EOF {
		t.Fatal(err)
	}
	return string(b), true
}

func TestMemCrashKeepsSynced(t *testing.T) {
	for seed := uint64(0); seed < 50; seed++ {
		m := NewMem()
		m.MkdirAll("/d", 0o755)
		f, _ := m.Create("/d/f")
		m.SyncDir("/d")
		mustWrite(t, f, "durable", 0)
		f.Sync()
		mustWrite(t, f, "-lost?", 7)
		m.Crash(seed)
		got, ok := contents(t, m, "/d/f")
		if !ok {
			t.Fatalf("seed %d: synced file lost", seed)
		}
		if len(got) < 7 || got[:7] != "durable" || !bytes.HasPrefix([]byte("durable-lost?"), []byte(got)) {
			t.Fatalf("seed %d: after crash %q, want a prefix of %q that keeps %q", seed, got, "durable-lost?", "durable")
		}
		if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, ErrCrashed) {
			t.Fatalf("seed %d: old handle after crash: %v", seed, err)
		}
	}
}

func TestMemCrashTearsAndLoses(t *testing.T) {
	// Over many seeds every outcome appears: nothing kept, torn, whole.
	seen := map[int]bool{}
	for seed := uint64(0); seed < 200; seed++ {
		m := NewMem()
		m.MkdirAll("/d", 0o755)
		f, _ := m.Create("/d/f")
		m.SyncDir("/d")
		mustWrite(t, f, "0123456789", 0)
		m.Crash(seed)
		got, _ := contents(t, m, "/d/f")
		if got != "0123456789"[:len(got)] {
			t.Fatalf("seed %d: %q is not a prefix", seed, got)
		}
		seen[len(got)] = true
	}
	if !seen[0] || !seen[10] || len(seen) < 5 {
		t.Fatalf("crash outcomes too narrow: %v", seen)
	}
}

func TestMemCrashNamespace(t *testing.T) {
	sawLost, sawKept := false, false
	for seed := uint64(0); seed < 100; seed++ {
		m := NewMem()
		m.MkdirAll("/d", 0o755)
		f, _ := m.Create("/d/a")
		f.Sync()
		m.SyncDir("/d")
		g, _ := m.Create("/d/b.tmp")
		mustWrite(t, g, "new", 0)
		g.Sync()
		m.Rename("/d/b.tmp", "/d/b")
		m.Crash(seed)
		_, tmp := contents(t, m, "/d/b.tmp")
		_, b := contents(t, m, "/d/b")
		if _, a := contents(t, m, "/d/a"); !a {
			t.Fatalf("seed %d: durable entry lost", seed)
		}
		if tmp && b {
			t.Fatalf("seed %d: rename both kept and not kept", seed)
		}
		if b {
			sawKept = true
		} else {
			sawLost = true
		}
	}
	if !sawLost || !sawKept {
		t.Fatalf("namespace crash outcomes too narrow: lost=%v kept=%v", sawLost, sawKept)
	}
	// After SyncDir a rename survives every crash.
	m := NewMem()
	m.MkdirAll("/d", 0o755)
	g, _ := m.Create("/d/b.tmp")
	mustWrite(t, g, "new", 0)
	g.Sync()
	m.Rename("/d/b.tmp", "/d/b")
	m.SyncDir("/d")
	m.Crash(7)
	if got, ok := contents(t, m, "/d/b"); !ok || got != "new" {
		t.Fatalf("synced rename lost: %q %v", got, ok)
	}
}

func TestMemCapacityAndInjection(t *testing.T) {
	m := NewMem()
	m.MkdirAll("/d", 0o755)
	m.SetCapacity(10)
	f, _ := m.Create("/d/f")
	n, err := f.WriteAt([]byte("0123456789abc"), 0)
	if n != 10 || !errors.Is(err, syscall.ENOSPC) || !IsNoSpace(err) {
		t.Fatalf("write over capacity = %d, %v", n, err)
	}
	if err := f.Preallocate(10, 100, true); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("preallocate over capacity: %v", err)
	}
	m.SetCapacity(-1)
	if _, err := f.WriteAt([]byte("abc"), 10); err != nil {
		t.Fatal(err)
	}
	m.SetInjector(func(op Op, _ string) error {
		if op == OpSync {
			return syscall.EIO
		}
		return nil
	})
	if err := f.Sync(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("injected sync error: %v", err)
	}
	if IsNoSpace(&SyncError{Err: syscall.ENOSPC}) {
		t.Fatal("a failed sync must not read as a retryable no-space write")
	}
	m.SetInjector(nil)
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}
