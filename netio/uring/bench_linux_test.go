//go:build linux

package uring

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The append benchmark of the issue: 256 MiB in 256 KiB writes with an
// fdatasync after every 1 MiB, on a real disk (never tmpfs).
const (
	benchTotalBytes     = 256 << 20
	benchWriteBytes     = 256 << 10
	benchSyncEveryBytes = 1 << 20
	benchWritesPerGroup = benchSyncEveryBytes / benchWriteBytes
	benchGroups         = benchTotalBytes / benchSyncEveryBytes
)

// benchBaselineMBps holds the pwrite loop's throughputs per file mode,
// measured earlier in the same run (one per -count repetition); the other
// variants report their ratio to the median.
var benchBaselineMBps = map[string][]float64{}

// BenchmarkAppend compares, for each file mode (fresh file, fallocated
// file, file already written once):
//
//   - pwrite: the baseline loop, 4×pwrite then fdatasync, on one goroutine;
//   - engine-chains=N: the Engine with N groups in flight, a group being 3
//     plain writes and a write linked to its fdatasync (what a log issues
//     when it flushes 256 KiB buffers and syncs every 1 MiB);
//   - strict-chains=N: the bare Ring with N groups in flight, a group being
//     w→w→w→w→fdatasync all linked, so the sync provably runs after all
//     four writes (the price of exact coverage).
//
// Run: go test -run '^$' -bench Append -benchtime 2x -count 5 ./netio/uring/
// (the machine must be otherwise idle: fdatasync timings are noisy).
func BenchmarkAppend(b *testing.B) {
	skipUnavailable(b)
	dir := benchDir(b)
	buf := make([]byte, benchWriteBytes)
	for i := range buf {
		buf[i] = byte(rand.Uint32())
	}
	for _, mode := range []string{"fresh", "fallocate", "rewrite"} {
		b.Run(mode+"/pwrite", func(b *testing.B) {
			benchAppend(b, dir, mode, func(fd int) { appendPwrite(b, fd, buf) })
		})
		for _, chains := range []int{1, 4} {
			b.Run(fmt.Sprintf("%s/engine-chains=%d", mode, chains), func(b *testing.B) {
				benchAppend(b, dir, mode, func(fd int) { appendEngine(b, fd, buf, chains) })
			})
			b.Run(fmt.Sprintf("%s/strict-chains=%d", mode, chains), func(b *testing.B) {
				benchAppend(b, dir, mode, func(fd int) { appendStrict(b, fd, buf, chains) })
			})
		}
	}
}

// benchDir is a temp directory on the real disk.
func benchDir(b *testing.B) string {
	dir := b.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		b.Fatal(err)
	}
	if st.Type == unix.TMPFS_MAGIC || st.Type == unix.RAMFS_MAGIC {
		b.Skipf("%s is on tmpfs/ramfs: fdatasync figures would be meaningless; set TMPDIR to a disk", dir)
	}
	return dir
}

// benchAppend runs appendAll over a fresh file per iteration, preparing the
// file per mode outside the timer, and reports MB/s and the ratio to the
// pwrite baseline of the same mode.
func benchAppend(b *testing.B, dir, mode string, appendAll func(fd int)) {
	b.SetBytes(benchTotalBytes)
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		path := filepath.Join(dir, "append")
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		prepareBenchFile(b, fd, mode)
		b.StartTimer()
		appendAll(fd)
		b.StopTimer()
		unix.Close(fd)
		os.Remove(path)
	}
	mbps := float64(b.N) * benchTotalBytes / 1e6 / b.Elapsed().Seconds()
	if strings.HasSuffix(b.Name(), "/pwrite") {
		benchBaselineMBps[mode] = append(benchBaselineMBps[mode], mbps)
	} else if base := median(benchBaselineMBps[mode]); base > 0 {
		b.ReportMetric(mbps/base, "x-pwrite")
	}
}

// median of xs, 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	return s[len(s)/2]
}

// prepareBenchFile puts the file in the state its mode names, durably.
func prepareBenchFile(b *testing.B, fd int, mode string) {
	switch mode {
	case "fallocate":
		if err := unix.Fallocate(fd, 0, 0, benchTotalBytes); err != nil {
			b.Skipf("fallocate: %v", err)
		}
	case "rewrite":
		zero := make([]byte, benchSyncEveryBytes)
		for off := int64(0); off < benchTotalBytes; off += benchSyncEveryBytes {
			if _, err := unix.Pwrite(fd, zero, off); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := unix.Fsync(fd); err != nil {
		b.Fatal(err)
	}
}

// appendPwrite is the baseline: synchronous pwrite and fdatasync.
func appendPwrite(b *testing.B, fd int, buf []byte) {
	for off := int64(0); off < benchTotalBytes; off += benchWriteBytes {
		if n, err := unix.Pwrite(fd, buf, off); err != nil || n != len(buf) {
			b.Fatalf("pwrite = %d, %v", n, err)
		}
		if (off+benchWriteBytes)%benchSyncEveryBytes == 0 {
			if err := unix.Fdatasync(fd); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// appendEngine appends through the Engine with chains groups in flight.
func appendEngine(b *testing.B, fd int, buf []byte, chains int) {
	b.StopTimer()
	e, err := NewEngine(Options{QueueDepth: chains * benchWritesPerGroup})
	if err != nil {
		b.Fatal(err)
	}
	f := &testFile{fd: fd, name: "append"}
	b.StartTimer()
	var opsDone [benchGroups]int
	issued, done := 0, 0
	onDone := func(tok uint64, err error) {
		if err != nil {
			b.Fatalf("token %d: %v", tok, err)
		}
		g := tok / benchWritesPerGroup
		if opsDone[g]++; opsDone[g] == benchWritesPerGroup {
			done++
		}
	}
	for done < benchGroups {
		for ; issued < benchGroups && issued-done < chains; issued++ {
			for w := range benchWritesPerGroup {
				off := int64(issued)*benchSyncEveryBytes + int64(w)*benchWriteBytes
				tok := uint64(issued*benchWritesPerGroup + w)
				if err := e.Write(f, buf, off, w == benchWritesPerGroup-1, tok); err != nil {
					b.Fatal(err)
				}
			}
			if err := e.Submit(); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := e.Reap(true, onDone); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if err := e.Close(); err != nil {
		b.Fatal(err)
	}
	b.StartTimer()
}

// appendStrict appends through the bare Ring, each group one fully linked
// chain w→w→w→w→fdatasync, chains groups in flight.
func appendStrict(b *testing.B, fd int, buf []byte, chains int) {
	b.StopTimer()
	r, err := NewRing(RingOptions{Entries: uint32(chains * (benchWritesPerGroup + 1))})
	if err != nil {
		b.Fatal(err)
	}
	var pin runtime.Pinner
	pin.Pin(&buf[0])
	b.StartTimer()
	var cqesSeen [benchGroups]int
	cqes := make([]CQE, 64)
	issued, done := 0, 0
	for done < benchGroups {
		for ; issued < benchGroups && issued-done < chains; issued++ {
			for w := range benchWritesPerGroup {
				sqe := r.GetSQE()
				sqe.PrepWrite(fd, buf, int64(issued)*benchSyncEveryBytes+int64(w)*benchWriteBytes)
				sqe.SetFlags(SQEIOLink)
				sqe.SetUserData(uint64(issued))
			}
			sqe := r.GetSQE()
			sqe.PrepFsync(fd, FsyncDatasync)
			sqe.SetUserData(uint64(issued))
		}
		if _, err := r.SubmitAndWait(1); err != nil {
			b.Fatal(err)
		}
		n, err := r.ReapCQEs(cqes)
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range cqes[:n] {
			if c.Res < 0 {
				b.Fatalf("group %d: errno %d", c.UserData, -c.Res)
			}
			if cqesSeen[c.UserData]++; cqesSeen[c.UserData] == benchWritesPerGroup+1 {
				done++
			}
		}
	}
	b.StopTimer()
	pin.Unpin()
	r.Close()
	b.StartTimer()
}

// BenchmarkWrite4K measures per-operation overhead on the page cache (no
// sync): a pwrite per 4 KiB vs the Engine submitting batches of 1 and 32,
// with its small writes made inline (the default) and with every write
// sent through the ring (ring-batch: the ring's own cost per operation,
// its counters included).
// Run: go test -run '^$' -bench Write4K ./netio/uring/
func BenchmarkWrite4K(b *testing.B) {
	skipUnavailable(b)
	dir := b.TempDir()
	buf := make([]byte, 4096)
	const span = 1 << 20 // overwrite the same MiB: page cache only
	b.Run("pwrite", func(b *testing.B) {
		f := newTestFile(b, dir, "pw")
		b.SetBytes(int64(len(buf)))
		for i := 0; i < b.N; i++ {
			if _, err := unix.Pwrite(f.fd, buf, int64(i*4096%span)); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, mode := range []struct {
		name   string
		inline int
	}{{"engine", 0}, {"ring", -1}} {
		for _, batch := range []int{1, 32} {
			b.Run(fmt.Sprintf("%s-batch=%d", mode.name, batch), func(b *testing.B) {
				f := newTestFile(b, dir, fmt.Sprintf("%s%d", mode.name, batch))
				e := newTestEngine(b, Options{QueueDepth: batch, InlineWriteMax: mode.inline})
				b.SetBytes(int64(len(buf)))
				fail := func(_ uint64, err error) {
					if err != nil {
						b.Fatal(err)
					}
				}
				for i := 0; i < b.N; i++ {
					if err := e.Write(f, buf, int64(i*4096%span), false, uint64(i)); err != nil {
						b.Fatal(err)
					}
					if (i+1)%batch == 0 || i == b.N-1 {
						if err := e.Submit(); err != nil {
							b.Fatal(err)
						}
						for e.InFlight() > 0 {
							if _, err := e.Reap(true, fail); err != nil {
								b.Fatal(err)
							}
						}
					}
				}
			})
		}
	}
}
