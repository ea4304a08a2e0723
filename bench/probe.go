package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"
	"golang.org/x/sys/unix"
)

// ProbeOptions configure the limit probes.
type ProbeOptions struct {
	// Dir is the directory whose file system the disk probes write to
	// (a temporary file, removed after).
	Dir string
	// Time bounds each probe. Default 2 s.
	Time time.Duration
	// ChunkBytes is the size of each write: the producer's batch size.
	// Default 64 KiB.
	ChunkBytes int
	// DiskBytesMax bounds the bytes each disk probe writes. Default 1 GiB.
	DiskBytesMax int64
	// IdealTime is how long the ideal broker runs (see RunIdeal); 0:
	// Time. A comparison runs it as long as each of its runs.
	IdealTime time.Duration
	// EchoCmd starts the answering side of the two-process round trip
	// (ServeEcho: `corestream bench echo`); "--connect ADDR" and
	// "--cpu N" are appended. Empty: the two-process round trips are not
	// measured (Limits.TwoProcessNote says so).
	EchoCmd []string
}

// DefaultProbeOptions returns the defaults (Dir empty: the temporary
// directory).
func DefaultProbeOptions() ProbeOptions {
	return ProbeOptions{Time: 2 * time.Second, ChunkBytes: 64 << 10, DiskBytesMax: 1 << 30}
}

// Limits are the machine's physical limits, measured by Probe.
type Limits struct {
	Measured   time.Time `json:"measured"`
	ChunkBytes int       `json:"chunk_bytes"`
	// TCPBytesPerSec is a plain Go TCP blast over loopback: one
	// connection, ChunkBytes writes, a reader that discards.
	TCPBytesPerSec float64 `json:"tcp_bytes_per_sec"`
	// TCPRoundTrip is a plain Go ping-pong over loopback: a 1 KiB request,
	// an 8-byte answer, one at a time: the floor of a synchronous
	// produce's latency.
	TCPRoundTrip *Summary `json:"tcp_round_trip,omitempty"`
	// TCPRoundTripTwoProcs is the same ping-pong with the answering side
	// in another process and both sides in blocking read and write calls
	// (echo.go), unpinned: the floor for a client of a broker, which is
	// always another process. TCPRoundTripTwoCPUs is the same with each
	// side pinned to its own CPU (TwoProcessCPUs): every round trip then
	// pays a wake-up across CPUs. TwoProcessNote says why one is missing.
	TCPRoundTripTwoProcs *Summary `json:"tcp_round_trip_two_processes,omitempty"`
	TCPRoundTripTwoCPUs  *Summary `json:"tcp_round_trip_two_cpus,omitempty"`
	TwoProcessCPUs       []int    `json:"two_process_cpus,omitempty"`
	TwoProcessNote       string   `json:"two_process_note,omitempty"`
	// Dir and FS name where the disk probes wrote and its file system.
	Dir string `json:"dir"`
	FS  string `json:"fs"`
	// DiskSyncBytesPerSec appends ChunkBytes writes to a new file, each
	// followed by fdatasync: the fastest a broker could stream with an
	// fsync per batch and no overlap. DiskSyncLatency is each pair's time.
	DiskSyncBytesPerSec float64  `json:"disk_sync_bytes_per_sec"`
	DiskSyncLatency     *Summary `json:"disk_sync_latency,omitempty"`
	// DiskWriteBytesPerSec appends ChunkBytes writes to a new file and
	// calls fdatasync once at the end (page cache, then one flush): the
	// sequential write bandwidth, the disk limit figures are shown
	// against.
	DiskWriteBytesPerSec float64 `json:"disk_write_bytes_per_sec"`
	// Ideal is the ideal broker (RunIdeal) on the same directory: the
	// ceiling corestream's throughput rows are read against.
	Ideal *IdealResult `json:"ideal,omitempty"`
}

// Probe measures the machine's limits: TCP over loopback, the disk
// with and without a sync per write, then the ideal broker.
func Probe(ctx context.Context, opt ProbeOptions) (*Limits, error) {
	def := DefaultProbeOptions()
	if opt.Time <= 0 {
		opt.Time = def.Time
	}
	if opt.ChunkBytes <= 0 {
		opt.ChunkBytes = def.ChunkBytes
	}
	if opt.DiskBytesMax <= 0 {
		opt.DiskBytesMax = def.DiskBytesMax
	}
	if opt.Dir == "" {
		opt.Dir = os.TempDir()
	}
	l := &Limits{Measured: time.Now().UTC(), ChunkBytes: opt.ChunkBytes, Dir: opt.Dir, FS: fsName(opt.Dir)}
	var err error
	if l.TCPBytesPerSec, err = probeTCP(ctx, opt.Time, opt.ChunkBytes); err != nil {
		return nil, fmt.Errorf("bench: TCP probe: %w", err)
	}
	if l.TCPRoundTrip, err = probeRTT(ctx, opt.Time/2); err != nil {
		return nil, fmt.Errorf("bench: TCP round-trip probe: %w", err)
	}
	l.probeTwoProcs(ctx, opt.EchoCmd, opt.Time/4)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if l.DiskSyncBytesPerSec, l.DiskSyncLatency, err = probeDisk(ctx, opt, true); err != nil {
		return nil, fmt.Errorf("bench: disk probe: %w", err)
	}
	if l.DiskWriteBytesPerSec, _, err = probeDisk(ctx, opt, false); err != nil {
		return nil, fmt.Errorf("bench: disk probe: %w", err)
	}
	iopt := DefaultIdealOptions()
	iopt.Dir, iopt.Time = opt.Dir, opt.IdealTime
	if iopt.Time <= 0 {
		iopt.Time = opt.Time
	}
	if l.Ideal, err = RunIdeal(ctx, iopt); err != nil {
		return nil, err
	}
	return l, nil
}

// probeTCP writes chunk-sized buffers to a loopback reader for d and
// returns the bytes per second the reader received.
func probeTCP(ctx context.Context, d time.Duration, chunk int) (float64, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	type result struct {
		n   int64
		end time.Time
		err error
	}
	got := make(chan result, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- result{err: err}
			return
		}
		defer c.Close()
		n, err := io.CopyBuffer(io.Discard, c, make([]byte, 256<<10))
		got <- result{n, time.Now(), err}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return 0, err
	}
	buf := make([]byte, chunk)
	start := time.Now()
	for time.Since(start) < d && ctx.Err() == nil {
		if _, err := c.Write(buf); err != nil {
			c.Close()
			return 0, err
		}
	}
	c.Close()
	r := <-got
	if r.err != nil {
		return 0, r.err
	}
	return float64(r.n) / r.end.Sub(start).Seconds(), ctx.Err()
}

// The round-trip probe's messages and its bound.
const (
	rttRequestBytes = 1 << 10
	rttAnswerBytes  = 8
	rttRoundsMax    = 200_000
)

// probeRTT sends a request and waits for its answer, one at a time, for
// d, and returns the round trips' latencies.
func probeRTT(ctx context.Context, d time.Duration) (*Summary, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		req, ans := make([]byte, rttRequestBytes), make([]byte, rttAnswerBytes)
		for {
			if _, err := io.ReadFull(c, req); err != nil {
				return
			}
			if _, err := c.Write(ans); err != nil {
				return
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return nil, err
	}
	defer c.Close()
	req, ans := make([]byte, rttRequestBytes), make([]byte, rttAnswerBytes)
	lat := newLatencies()
	start := time.Now()
	for i := 0; i < rttRoundsMax && time.Since(start) < d && ctx.Err() == nil; i++ {
		t := time.Now()
		if _, err := c.Write(req); err != nil {
			return nil, err
		}
		if _, err := io.ReadFull(c, ans); err != nil {
			return nil, err
		}
		lat.record(int64(time.Since(t)))
	}
	return lat.summary(), ctx.Err()
}

// probeTwoProcs measures the two-process round trips for d each: unpinned,
// then pinned to two CPUs when there are two. A failure is not the
// probe's: it is noted in TwoProcessNote and the figure stays nil.
func (l *Limits) probeTwoProcs(ctx context.Context, echo []string, d time.Duration) {
	var notes []string
	if len(echo) == 0 {
		l.TwoProcessNote = "not measured: no echo command"
		return
	}
	var err error
	if l.TCPRoundTripTwoProcs, err = probeProcRTT(ctx, procRTTOptions{Cmd: echo, Time: d}); err != nil {
		notes = append(notes, "unpinned: "+err.Error())
	}
	if cpus := twoCPUs(); cpus == nil {
		notes = append(notes, "not pinned: fewer than two CPUs")
	} else if l.TCPRoundTripTwoCPUs, err = probeProcRTT(ctx, procRTTOptions{Cmd: echo, Time: d, CPUs: cpus}); err != nil {
		notes = append(notes, "pinned: "+err.Error())
	} else {
		l.TwoProcessCPUs = cpus
	}
	l.TwoProcessNote = strings.Join(notes, "; ")
}

// probeDisk appends chunks to a new file in opt.Dir for opt.Time (or
// opt.DiskBytesMax): with each a fdatasync when syncEach, else one at the
// end. It returns bytes per second and, with syncEach, the latency of each
// write + fdatasync.
func probeDisk(ctx context.Context, opt ProbeOptions, syncEach bool) (float64, *Summary, error) {
	f, err := os.CreateTemp(opt.Dir, "corestream-probe-*")
	if err != nil {
		return 0, nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := newValue(opt.ChunkBytes, 7, 0)
	fd := int(f.Fd())
	lat := newLatencies()
	var n int64
	start := time.Now()
	for n < opt.DiskBytesMax && time.Since(start) < opt.Time && ctx.Err() == nil {
		t := time.Now()
		if _, err := f.Write(buf); err != nil {
			return 0, nil, err
		}
		if syncEach {
			if err := unix.Fdatasync(fd); err != nil {
				return 0, nil, err
			}
			lat.record(int64(time.Since(t)))
		}
		n += int64(len(buf))
	}
	if !syncEach {
		if err := unix.Fdatasync(fd); err != nil {
			return 0, nil, err
		}
	}
	el := time.Since(start)
	if n == 0 {
		return 0, nil, errors.New("nothing written")
	}
	return float64(n) / el.Seconds(), lat.summary(), ctx.Err()
}

// fsName names the file system dir is on (from statfs's magic number).
func fsName(dir string) string {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return "unknown"
	}
	names := map[int64]string{
		0xEF53: "ext4", 0x58465342: "xfs", 0x9123683E: "btrfs", 0x01021994: "tmpfs",
		0x794c7630: "overlayfs", 0x2fc12fc1: "zfs", 0x65735546: "fuse", 0x6969: "nfs",
	}
	if n, ok := names[int64(st.Type)]; ok {
		return n
	}
	return fmt.Sprintf("0x%x", st.Type)
}

// WriteTable prints the limits.
func (l *Limits) WriteTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "limit\tMB/s\tnotes\n")
	fmt.Fprintf(tw, "loopback TCP blast\t%s\tone connection, %d KiB writes\n", fmtMBps(l.TCPBytesPerSec), l.ChunkBytes>>10)
	if s := l.TCPRoundTrip; s != nil {
		fmt.Fprintf(tw, "loopback TCP round trip\t-\t1 KiB request, 8-byte answer, one at a time, two goroutines of one process: p50 %s, p99 %s, p99.9 %s\n",
			FormatNs(s.P50Ns), FormatNs(s.P99Ns), FormatNs(s.P999Ns))
	}
	rtt := func(s *Summary, what, how string) {
		if s != nil {
			fmt.Fprintf(tw, "loopback round trip, %s\t-\tp50 %s, p99 %s, p99.9 %s: %s\n", what, FormatNs(s.P50Ns), FormatNs(s.P99Ns), FormatNs(s.P999Ns), how)
		}
	}
	rtt(l.TCPRoundTripTwoProcs, "two processes", "the same, answered by another process (bench echo), blocking read/write on both sides, unpinned (the \"2-proc\" figure)")
	if c := l.TwoProcessCPUs; len(c) == 2 {
		rtt(l.TCPRoundTripTwoCPUs, "two processes on different CPUs", fmt.Sprintf("the same, this side pinned to CPU %d, the echo to CPU %d", c[0], c[1]))
	}
	if l.TwoProcessNote != "" {
		fmt.Fprintf(tw, "loopback round trip, two processes\t-\t%s\n", firstLine(l.TwoProcessNote))
	}
	note := fmt.Sprintf("%s on %s, %d KiB writes each followed by fdatasync", l.Dir, l.FS, l.ChunkBytes>>10)
	if s := l.DiskSyncLatency; s != nil {
		note += fmt.Sprintf(" (p50 %s, p99 %s)", FormatNs(s.P50Ns), FormatNs(s.P99Ns))
	}
	fmt.Fprintf(tw, "disk write+fdatasync\t%s\t%s\n", fmtMBps(l.DiskSyncBytesPerSec), note)
	fmt.Fprintf(tw, "disk write, one fdatasync\t%s\t%d KiB writes, one fdatasync at the end (the disk limit below)\n", fmtMBps(l.DiskWriteBytesPerSec), l.ChunkBytes>>10)
	if r := l.Ideal; r != nil {
		fmt.Fprintf(tw, "ideal broker\t%s\t%s msg/s of 1 KiB over %v, server CPU %s/msg, client CPU %s/msg (%.0f%% of a core busy): one connection, 64 × 1 KiB frames with CRC-32C, one write per read, fallocate ahead, fdatasync + fadvise(DONTNEED) every 64 MiB (the \"vs ideal\" column)\n",
			fmtMBps(r.BytesPerSec()), humanize.CommafWithDigits(r.MessagesPerSec(), 0), r.Elapsed.Round(time.Millisecond),
			FormatNs(int64(r.CPUPerMessageNs())), FormatNs(int64(r.ClientCPUPerMessageNs())), r.BusyPercent())
	}
	tw.Flush()
	if l.FS == "tmpfs" {
		fmt.Fprintln(w, "WARNING: the directory is on tmpfs: fdatasync costs nothing there; fsync figures mean little")
	}
}
