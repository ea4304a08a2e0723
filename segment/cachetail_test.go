package segment

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/corestream/corestream/segment/vfs"
)

// residentPages counts the pages of f's [from, to) in the page cache.
func residentPages(t *testing.T, f vfs.File, from, to int64) int {
	t.Helper()
	page := int64(unix.Getpagesize())
	from, to = from/page*page, (to+page-1)/page*page
	if to <= from {
		return 0
	}
	m, err := unix.Mmap(int(f.Fd()), from, int(to-from), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (to-from)/page)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

// TestCacheTailDropsSyncedPages: under never with writeback syncs, and
// under always, the active segment's synced pages more than
// CacheTailBytes behind its written end leave the page cache, and the
// tail stays; with -1 nothing is dropped (the control that shows the drop
// is the log's doing).
func TestCacheTailDropsSyncedPages(t *testing.T) {
	var st unix.Statfs_t
	if err := unix.Statfs(t.TempDir(), &st); err == nil && st.Type == unix.TMPFS_MAGIC {
		t.Skip("tmpfs pages cannot be dropped")
	}
	const (
		tail      = 512 << 10
		writeback = 256 << 10
		total     = 6 << 20
	)
	for _, ef := range testEngines {
		for _, c := range []struct {
			name  string
			fsync FsyncPolicy
			keep  bool
		}{{"never/drop", FsyncNever, false}, {"never/keep", FsyncNever, true}, {"always/drop", FsyncAlways, false}} {
			keep := c.keep
			t.Run(ef.name+"/"+c.name, func(t *testing.T) {
				cfg := Config{Fsync: c.fsync, WritebackBytes: writeback, CacheTailBytes: tail, SegmentBytes: 64 << 20}
				if keep {
					cfg.CacheTailBytes = -1
				}
				l := openLog(t, vfs.OS(), t.TempDir()+"/p", cfg, ef.new(t))
				defer l.Close()
				if c.fsync == FsyncAlways && l.io.bg == nil {
					t.Skip("under always only an IO with a background worker drops pages")
				}
				rng := newRNG(3)
				for l.active().writtenSize < total {
					if _, _, err := l.AppendLeader(makeBatch(rng, 4, 32<<10, 1), 1); err != nil {
						t.Fatal(err)
					}
					mustFlush(t, l)
				}
				if err := l.Sync(); err != nil {
					t.Fatal(err)
				}
				s := l.active()
				f := s.file.f
				if keep {
					if s.droppedEnd != 0 || residentPages(t, f, 0, 1<<20) == 0 {
						t.Fatalf("with -1 the log dropped pages (dropped to %d)", s.droppedEnd)
					}
					return
				}
				if s.droppedEnd < total-2*tail-2*writeback {
					t.Fatalf("dropped up to %d of %d written, want all but the %d-byte tail and a writeback step", s.droppedEnd, s.writtenSize, tail)
				}
				if n := residentPages(t, f, 0, s.droppedEnd); n != 0 {
					t.Fatalf("%d pages below the dropped end %d are still cached", n, s.droppedEnd)
				}
				if n := residentPages(t, f, s.droppedEnd, s.writtenSize); n == 0 {
					t.Fatal("the tail left the page cache too")
				}
			})
		}
	}
}
