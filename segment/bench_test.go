package segment

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/corestream/corestream/netio/uring"
	"github.com/corestream/corestream/segment/vfs"
)

// Benchmarks compare the log against a baseline measured in the same run,
// on the same file system, alternating which goes first. Each reports the
// baseline's and the log's MB/s and their ratio (log/baseline) as metrics.
// The figures and the commands are in docs/design/segment.md.

var (
	benchDir       = flag.String("benchdir", "", "benchmarks: directory on the disk to measure (default: a temp dir; must not be tmpfs)")
	benchReadBytes = flag.Int64("readbytes", 1<<30, "BenchmarkReadSendfile: bytes of log to read")
	benchChains    = flag.Int("chains", 0, "BenchmarkAppendAlways: Config.ChainsInFlight (0: the default)")
)

const (
	benchBatchBytes   = 64 << 10 // a 64 KiB batch
	benchRecords      = 64       // of 1 KiB records
	benchNeverBytes   = 256 << 20
	benchAlwaysBytes  = 32 << 20
	tmpfsMagic        = 0x01021994
	benchReadChunkMax = 1 << 20
)

func benchRoot(b *testing.B) string {
	dir := *benchDir
	if dir == "" {
		dir = b.TempDir()
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		b.Fatal(err)
	}
	if st.Type == tmpfsMagic {
		b.Fatalf("%s is tmpfs: pass -benchdir on a real disk", dir)
	}
	return dir
}

type benchEngine struct {
	name string
	new  func() (Engine, error)
}

func benchEngines() []benchEngine {
	return []benchEngine{
		{"pwrite", func() (Engine, error) { return NewPwriteEngine(), nil }},
		{"io_uring", func() (Engine, error) {
			e, err := uring.NewEngine(uring.Options{})
			if err != nil {
				return nil, err
			}
			return e, nil
		}},
	}
}

// mbps is megabytes (1e6) per second.
func mbps(bytes int64, d time.Duration) float64 { return float64(bytes) / d.Seconds() / 1e6 }

func report(b *testing.B, bytes int64, base, log time.Duration) {
	b.ReportMetric(mbps(bytes*int64(b.N), base), "base-MB/s")
	b.ReportMetric(mbps(bytes*int64(b.N), log), "log-MB/s")
	b.ReportMetric(base.Seconds()/log.Seconds(), "ratio")
}

// rawWrite is the baseline of the never policy: sequential write(2) of the
// same 64 KiB batches into a fresh file, page cache only.
func rawWrite(b *testing.B, dir string, total int64, buf []byte) time.Duration {
	name := filepath.Join(dir, "raw.dat")
	fd, err := unix.Open(name, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for n := int64(0); n < total; n += int64(len(buf)) {
		if _, err := unix.Write(fd, buf); err != nil {
			b.Fatal(err)
		}
	}
	el := time.Since(start)
	unix.Close(fd)
	os.Remove(name)
	return el
}

// naiveSync is the baseline of the always policy: pwrite then fdatasync
// for every batch, file growing as it goes.
func naiveSync(b *testing.B, dir string, total int64, buf []byte) time.Duration {
	name := filepath.Join(dir, "naive.dat")
	fd, err := unix.Open(name, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for off := int64(0); off < total; off += int64(len(buf)) {
		if _, err := unix.Pwrite(fd, buf, off); err != nil {
			b.Fatal(err)
		}
		if err := unix.Fdatasync(fd); err != nil {
			b.Fatal(err)
		}
	}
	el := time.Since(start)
	unix.Close(fd)
	os.Remove(name)
	return el
}

// logAppend appends total bytes of 64 KiB batches, flushing every
// perFlush appends (one event-loop iteration), and waits until everything
// is written (never) or durable (always). Open and Close are not timed.
func logAppend(b *testing.B, dir string, e Engine, cfg Config, total int64, perFlush int, batch []byte) time.Duration {
	d := NewIO(e)
	ldir := filepath.Join(dir, "log")
	l, err := OpenLog(vfs.OS(), ldir, cfg, d)
	if err != nil {
		b.Fatal(err)
	}
	n := int(total / int64(len(batch)))
	start := time.Now()
	for i := 1; i <= n; i++ {
		if _, _, err := l.AppendLeader(batch, 1); err != nil {
			b.Fatal(err)
		}
		if i%perFlush == 0 {
			if err := d.Flush(); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := d.Flush(); err != nil {
		b.Fatal(err)
	}
	want := l.LogEndOffset() - 1
	for l.WrittenOffset() < want || (cfg.Fsync == FsyncAlways && l.DurableOffset() < want) {
		if _, err := d.Wait(); err != nil {
			b.Fatal(err)
		}
		if l.Err() != nil {
			b.Fatal(l.Err())
		}
	}
	el := time.Since(start)
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	d.Close()
	os.RemoveAll(ldir)
	return el
}

func benchBatch() []byte {
	return makeBatch(newRNG(1), benchRecords, benchBatchBytes-61, 1)
}

// BenchmarkAppendNever: the log under FsyncNever against sequential
// write(2) of the same batches (target: ratio >= 0.8).
func BenchmarkAppendNever(b *testing.B) {
	batch := benchBatch()
	for _, be := range benchEngines() {
		for _, perFlush := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/appends-per-flush=%d", be.name, perFlush), func(b *testing.B) {
				dir := benchRoot(b)
				var base, log time.Duration
				for i := 0; i < b.N; i++ {
					e, err := be.new()
					if err != nil {
						b.Skip(err)
					}
					cfg := Config{Fsync: FsyncNever}
					if i%2 == 0 {
						base += rawWrite(b, dir, benchNeverBytes, batch)
						log += logAppend(b, dir, e, cfg, benchNeverBytes, perFlush, batch)
					} else {
						log += logAppend(b, dir, e, cfg, benchNeverBytes, perFlush, batch)
						base += rawWrite(b, dir, benchNeverBytes, batch)
					}
				}
				report(b, benchNeverBytes, base, log)
			})
		}
	}
}

// BenchmarkAppendAlways: the log under FsyncAlways against pwrite and
// fdatasync per batch (target: ratio >= 2 with io_uring). appends-per-flush
// is the group-commit width: how many producers' batches one event-loop
// iteration sees.
func BenchmarkAppendAlways(b *testing.B) {
	batch := benchBatch()
	type variant struct {
		perFlush int
		mode     PreallocMode
	}
	variants := []variant{{1, PreallocAuto}, {4, PreallocAuto}, {16, PreallocAuto}}
	for _, be := range benchEngines() {
		for _, v := range variants {
			name := fmt.Sprintf("%s/appends-per-flush=%d", be.name, v.perFlush)
			if v.mode != PreallocAuto {
				name += "/prealloc=" + v.mode.String()
			}
			b.Run(name, func(b *testing.B) {
				dir := benchRoot(b)
				var base, log time.Duration
				for i := 0; i < b.N; i++ {
					e, err := be.new()
					if err != nil {
						b.Skip(err)
					}
					cfg := Config{Fsync: FsyncAlways, Preallocate: v.mode, ChainsInFlight: *benchChains}
					if i%2 == 0 {
						base += naiveSync(b, dir, benchAlwaysBytes, batch)
						log += logAppend(b, dir, e, cfg, benchAlwaysBytes, v.perFlush, batch)
					} else {
						log += logAppend(b, dir, e, cfg, benchAlwaysBytes, v.perFlush, batch)
						base += naiveSync(b, dir, benchAlwaysBytes, batch)
					}
				}
				report(b, benchAlwaysBytes, base, log)
			})
		}
	}
}

// BenchmarkLogPrealloc compares the log's preallocation modes under
// FsyncAlways, one append per flush, in the same run: keep-size is the
// baseline, zero-fill the candidate (ratio > 1: zero-fill is faster).
func BenchmarkLogPrealloc(b *testing.B) {
	batch := benchBatch()
	for _, be := range benchEngines() {
		b.Run(be.name, func(b *testing.B) {
			dir := benchRoot(b)
			var ratios []float64
			var keep, zero time.Duration
			for i := 0; i < b.N; i++ {
				run := func(m PreallocMode) time.Duration {
					e, err := be.new()
					if err != nil {
						b.Skip(err)
					}
					cfg := Config{Fsync: FsyncAlways, Preallocate: m, ChainsInFlight: *benchChains}
					return logAppend(b, dir, e, cfg, benchAlwaysBytes, 1, batch)
				}
				var k, z time.Duration
				if i%2 == 0 {
					k, z = run(PreallocKeepSize), run(PreallocZeroFill)
				} else {
					z, k = run(PreallocZeroFill), run(PreallocKeepSize)
				}
				keep, zero = keep+k, zero+z
				ratios = append(ratios, k.Seconds()/z.Seconds())
			}
			report(b, benchAlwaysBytes, keep, zero)
			b.ReportMetric(median(ratios), "median-ratio")
		})
	}
}

// BenchmarkPreallocation measures pwrite+fdatasync of 64 KiB writes into a
// fresh 16 MiB file with the space ahead of the write position prepared
// four ways, 8 MiB at a time (the measurement behind the log's
// preallocation; see docs/design/segment.md). Every iteration runs every
// mode once, in a seeded random order; it reports each mode's median MB/s
// and its median ratio to "none" over the iterations (run it with
// -benchtime 20x or more: a shared disk is noisy).
func BenchmarkPreallocation(b *testing.B) {
	buf := benchBatch()
	const step, total = 8 << 20, 16 << 20
	modes := []string{"none", "keep-size", "extend", "zero-fill"}
	dir := benchRoot(b)
	run := func(mode string) time.Duration {
		name := filepath.Join(dir, "pre.dat")
		fd, err := unix.Open(name, unix.O_RDWR|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		defer os.Remove(name)
		defer unix.Close(fd)
		zeros := make([]byte, 1<<20)
		var reserved int64
		start := time.Now()
		for off := int64(0); off < total; off += int64(len(buf)) {
			if off+int64(len(buf)) > reserved {
				switch mode {
				case "keep-size":
					err = unix.Fallocate(fd, unix.FALLOC_FL_KEEP_SIZE, reserved, step)
				case "extend":
					err = unix.Fallocate(fd, 0, reserved, step)
				case "zero-fill":
					for z := reserved; z < reserved+step && err == nil; z += int64(len(zeros)) {
						_, err = unix.Pwrite(fd, zeros, z)
					}
					if err == nil {
						err = unix.Fdatasync(fd)
					}
				}
				if err != nil {
					b.Fatal(err)
				}
				reserved += step
			}
			if _, err := unix.Pwrite(fd, buf, off); err != nil {
				b.Fatal(err)
			}
			if err := unix.Fdatasync(fd); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	rng := newRNG(5)
	samples := map[string][]float64{}
	ratios := map[string][]float64{}
	for i := 0; i < b.N; i++ {
		order := append([]string(nil), modes...)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		got := map[string]time.Duration{}
		for _, m := range order {
			got[m] = run(m)
			samples[m] = append(samples[m], mbps(total, got[m]))
		}
		for _, m := range modes[1:] {
			ratios[m] = append(ratios[m], got["none"].Seconds()/got[m].Seconds())
		}
	}
	for _, m := range modes {
		b.ReportMetric(median(samples[m]), m+"-MB/s")
		if m != "none" {
			b.ReportMetric(median(ratios[m]), m+"-ratio")
		}
	}
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// BenchmarkReadSendfile reads -readbytes of log through Read's spans with
// sendfile into a socket, against sendfile of the same segment files
// straight through (target: ratio >= 0.8). A goroutine drains the socket.
func BenchmarkReadSendfile(b *testing.B) {
	dir := benchRoot(b)
	ldir := filepath.Join(dir, "readlog")
	cfg := Config{Fsync: FsyncNever}
	l, err := OpenLog(vfs.OS(), ldir, cfg, nil)
	if err != nil {
		b.Fatal(err)
	}
	batch := benchBatch()
	for l.Size() < *benchReadBytes {
		if _, _, err := l.AppendLeader(batch, 1); err != nil {
			b.Fatal(err)
		}
		if l.LogEndOffset()%(16*benchRecords) == 0 {
			l.IO().Flush()
		}
	}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(ldir)
	if l, err = OpenLog(vfs.OS(), ldir, cfg, nil); err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	total := l.Size()

	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fds[0])
	drained := make(chan int64)
	go func() {
		buf := make([]byte, 1<<20)
		var n int64
		for {
			m, err := unix.Read(fds[1], buf)
			if m <= 0 || err != nil {
				unix.Close(fds[1])
				drained <- n
				return
			}
			n += int64(m)
		}
	}()
	out := fds[0]
	sendAll := func(fd int, pos, n int64) {
		for n > 0 {
			m, err := unix.Sendfile(out, fd, &pos, int(min(n, 1<<30)))
			if err != nil && !errors.Is(err, unix.EINTR) && !errors.Is(err, unix.EAGAIN) {
				b.Fatal(err)
			}
			n -= int64(max(m, 0))
		}
	}
	raw := func() time.Duration {
		start := time.Now()
		for _, s := range l.segs {
			for pos := int64(0); pos < s.size; pos += benchReadChunkMax {
				sendAll(int(s.file.f.Fd()), pos, min(benchReadChunkMax, s.size-pos))
			}
		}
		return time.Since(start)
	}
	viaLog := func() time.Duration {
		start := time.Now()
		var spans []Span
		for off := l.LogStartOffset(); off < l.LogEndOffset(); {
			spans, err = l.ReadAppend(spans[:0], off, benchReadChunkMax, l.LogEndOffset()-1)
			if err != nil {
				b.Fatal(err)
			}
			for _, sp := range spans {
				sendAll(int(sp.Fd()), sp.Pos, sp.Len)
				off = sp.LastOffset + 1
			}
			ReleaseSpans(spans)
		}
		return time.Since(start)
	}
	raw() // warm the page cache for both
	b.ResetTimer()
	var base, log time.Duration
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			base += raw()
			log += viaLog()
		} else {
			log += viaLog()
			base += raw()
		}
	}
	b.StopTimer()
	report(b, total, base, log)
	unix.Shutdown(out, unix.SHUT_WR)
	if got := <-drained; got != total*int64(2*b.N+1) {
		b.Fatalf("drained %d bytes, want %d", got, total*int64(2*b.N+1))
	}
}

// BenchmarkAppendLent compares the produce path's two appends under
// FsyncNever, in the same run: AppendLeaderChecked copies each batch into
// the log's write buffer (the baseline), AppendLeaderCheckedLent writes a
// batch of at least InPlaceBytesMin from where it lies. appends-per-flush
// is 4: a shard's 256 KiB read holds four 64 KiB frames. Besides the MB/s
// of each it reports the process's CPU time (user and system, the
// kernel's writes included) per batch, which is what the copy costs; the
// batch sizes bracket InPlaceBytesMin.
func BenchmarkAppendLent(b *testing.B) {
	const total, perFlush = 128 << 20, 4
	for _, be := range benchEngines() {
		for _, size := range []int{32 << 10, 48 << 10, 64 << 10} {
			b.Run(fmt.Sprintf("%s/batch=%dKiB", be.name, size>>10), func(b *testing.B) {
				dir := benchRoot(b)
				var base, lent benchCost
				for i := 0; i < b.N; i++ {
					for k := 0; k < 2; k++ {
						e, err := be.new()
						if err != nil {
							b.Skip(err)
						}
						if (i+k)%2 == 0 {
							base.add(lentAppend(b, dir, e, total, perFlush, size, false))
						} else {
							lent.add(lentAppend(b, dir, e, total, perFlush, size, true))
						}
					}
				}
				batches := float64(b.N) * float64(total/size)
				b.ReportMetric(mbps(total*int64(b.N), base.wall), "copy-MB/s")
				b.ReportMetric(mbps(total*int64(b.N), lent.wall), "lent-MB/s")
				b.ReportMetric(float64(base.cpu.Nanoseconds())/batches, "copy-cpu-ns/batch")
				b.ReportMetric(float64(lent.cpu.Nanoseconds())/batches, "lent-cpu-ns/batch")
			})
		}
	}
}

// benchCost sums the wall and process CPU time of runs.
type benchCost struct{ wall, cpu time.Duration }

func (c *benchCost) add(o benchCost) { c.wall += o.wall; c.cpu += o.cpu }

// processCPU is the process's user and system time so far.
func processCPU(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// lentAppend appends total bytes of size-byte batches as the produce path
// does, lent (AppendLeaderCheckedLent, each batch from a ring of buffers
// that a release returns) or copied (AppendLeaderChecked), flushing every
// perFlush appends, and waits until everything is written.
func lentAppend(b *testing.B, dir string, e Engine, total int64, perFlush, size int, lend bool) benchCost {
	d := NewIO(e)
	ldir := filepath.Join(dir, "log")
	l, err := OpenLog(vfs.OS(), ldir, Config{Fsync: FsyncNever}, d)
	if err != nil {
		b.Fatal(err)
	}
	proto := makeBatch(newRNG(1), max(1, size>>10), size-61, 1)
	// A batch is reused only once its release returned it: at most
	// ChainsInFlight are out.
	free := make([][]byte, 2*ChainsInFlightDefault)
	for i := range free {
		free[i] = bytes.Clone(proto)
	}
	n := int(total / int64(size))
	cpu0, start := processCPU(b), time.Now()
	for i := 1; i <= n; i++ {
		if len(free) == 0 {
			b.Fatal("every batch is out: the log holds more than ChainsInFlight")
		}
		buf := free[len(free)-1]
		if lend {
			_, _, err = l.AppendLeaderCheckedLent(buf, 1, func() func() {
				free = free[:len(free)-1]
				return func() { free = append(free, buf) }
			})
		} else {
			_, _, err = l.AppendLeaderChecked(buf, 1)
		}
		if err != nil {
			b.Fatal(err)
		}
		if i%perFlush == 0 {
			if err := d.Flush(); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := d.Flush(); err != nil {
		b.Fatal(err)
	}
	for want := l.LogEndOffset() - 1; l.WrittenOffset() < want; {
		if _, err := d.Wait(); err != nil {
			b.Fatal(err)
		}
		if l.Err() != nil {
			b.Fatal(l.Err())
		}
	}
	c := benchCost{wall: time.Since(start), cpu: processCPU(b) - cpu0}
	if err := l.Close(); err != nil {
		b.Fatal(err)
	}
	d.Close()
	os.RemoveAll(ldir)
	return c
}
