package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The ideal broker is the yardstick corestream's throughput rows are
// read against: the least a broker must do to take 1 KiB messages off one
// connection and put them in a log, done as cheaply as this machine
// allows, in the same run as the rows it judges (the machine's speed
// drifts by 2× between runs, so only same-run ratios mean anything).
//
// The client builds 64 KiB frames of 64 × 1 KiB messages (a copy per
// message and a CRC-32C per frame, as a real producer must), writes them
// down one connection and waits for nothing. The server reads, checks each
// frame's CRC, appends everything complete that one read brought with one
// write, preallocates the file ahead of the writes (so a write never
// changes the file's size and a sync commits no metadata), and after each
// SyncBytes a background thread fdatasyncs and drops the written-back
// pages from the page cache with fadvise(DONTNEED). Dropping them matters
// on this kind of VM: once a run has written a few GB, each new page-cache
// page is faulted back in from the host, and a server that keeps its pages
// falls from 1.1–1.8 GB/s to 0.3–0.4 GB/s within a 10 s run.
//
// A frame on the wire and on disk (big-endian):
//
//	+-------------------+-----------------------+----------------------+
//	| body bytes (u32)  | CRC-32C of body (u32) | body: the messages   |
//	+-------------------+-----------------------+----------------------+
//	0                   4                       8
//
// Message k's first 8 bytes are k (big-endian); the rest is a window of a
// pseudo-random source that moves with k (see idealMessage).
const (
	idealFrameHeaderBytes = 8
	idealReadBytes        = 1 << 20 // the server's read buffer
	idealFrameBytesMax    = idealReadBytes - idealFrameHeaderBytes
	idealSourceBytes      = 256 << 10
)

// ErrIdealCorrupt is returned when the ideal broker's server reads a frame
// whose CRC or length is wrong: a bug in the ideal broker, never load.
var ErrIdealCorrupt = errors.New("bench: ideal broker: corrupt frame")

var idealCRC = crc32.MakeTable(crc32.Castagnoli)

// IdealOptions configure the ideal broker.
type IdealOptions struct {
	// Dir is where the log is written (files removed after unless Keep).
	Dir string
	// Time bounds the run. Default 2 s.
	Time time.Duration
	// BytesMax bounds the message bytes sent; 0: none.
	BytesMax int64
	// MessageBytes and FrameMessages shape the load. Defaults 1 KiB, 64.
	MessageBytes, FrameMessages int
	// PreallocBytes is how far ahead of the writes the file is
	// allocated. Default 8 MiB.
	PreallocBytes int64
	// SyncBytes is how often (in bytes written) the background thread
	// syncs and drops the written pages. Default 64 MiB.
	SyncBytes int64
	// SegmentBytes is the size at which the log rolls to a new file; a
	// rolled file is deleted once synced (retention), so that a long run
	// needs no more disk than two segments. Default 1 GiB.
	SegmentBytes int64
	// Keep keeps the log's files (tests); Dir then holds them in order,
	// named by their first byte's offset.
	Keep bool
}

// DefaultIdealOptions returns the defaults.
func DefaultIdealOptions() IdealOptions {
	return IdealOptions{Time: 2 * time.Second, MessageBytes: 1 << 10, FrameMessages: 64,
		PreallocBytes: 8 << 20, SyncBytes: 64 << 20, SegmentBytes: 1 << 30}
}

// IdealResult is what an ideal-broker run measured.
type IdealResult struct {
	// Messages and Bytes (message bytes, frame headers not counted)
	// written by the server.
	Messages int64 `json:"messages"`
	Bytes    int64 `json:"bytes"`
	// Elapsed runs from the client's first write to the server's last.
	Elapsed time.Duration `json:"elapsed_ns"`
	// ServerCPUNs is the CPU time of the server's two threads (reader
	// and syncer), page-cache copying included: they use plain
	// syscalls, so the kernel's work is charged to them.
	ServerCPUNs int64 `json:"server_cpu_ns"`
	// ClientCPUNs is the CPU time of the client's thread: building the
	// frames (a copy per message, a CRC per frame) and writing them, the
	// kernel's send path included. It is what an ideal load generator
	// costs on the cores it shares with the server.
	ClientCPUNs int64 `json:"client_cpu_ns"`
	// ServerCPUPerMsgNs and ClientCPUPerMsgNs are the two CPU times
	// per message (CPUPerMessageNs, ClientCPUPerMessageNs), written out
	// for readers of the JSON.
	ServerCPUPerMsgNs float64 `json:"server_cpu_per_message_ns"`
	ClientCPUPerMsgNs float64 `json:"client_cpu_per_message_ns"`
}

// BytesPerSec returns the message bytes written per second.
func (r *IdealResult) BytesPerSec() float64 { return perSec(r.Bytes, r.Elapsed) }

// MessagesPerSec returns the messages written per second.
func (r *IdealResult) MessagesPerSec() float64 { return perSec(r.Messages, r.Elapsed) }

// CPUPerMessageNs returns the server's CPU time per message.
func (r *IdealResult) CPUPerMessageNs() float64 {
	if r.Messages == 0 {
		return 0
	}
	return float64(r.ServerCPUNs) / float64(r.Messages)
}

// ClientCPUPerMessageNs returns the client's CPU time per message.
func (r *IdealResult) ClientCPUPerMessageNs() float64 {
	if r.Messages == 0 {
		return 0
	}
	return float64(r.ClientCPUNs) / float64(r.Messages)
}

// BusyPercent returns the client's and the server's CPU time together
// over the run's time, in percent of one core.
func (r *IdealResult) BusyPercent() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return 100 * float64(r.ServerCPUNs+r.ClientCPUNs) / float64(r.Elapsed)
}

func perSec(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// idealSource returns the bytes messages are copied from: the same in
// every run.
func idealSource() []byte { return newValue(idealSourceBytes, 19, 0) }

// idealMessage fills m with message k: k, then a window of src that
// moves with k.
// REQUIRES: 8 <= len(m) <= len(src).
func idealMessage(m, src []byte, k uint64) {
	off := int(k*61) % (len(src) - len(m) + 1)
	copy(m, src[off:off+len(m)])
	binary.BigEndian.PutUint64(m, k)
}

// RunIdeal runs the ideal broker over loopback: a server and a client in
// this process, one connection.
func RunIdeal(ctx context.Context, opt IdealOptions) (*IdealResult, error) {
	def := DefaultIdealOptions()
	if opt.Time <= 0 {
		opt.Time = def.Time
	}
	if opt.MessageBytes < 8 {
		opt.MessageBytes = def.MessageBytes
	}
	if opt.FrameMessages <= 0 {
		opt.FrameMessages = def.FrameMessages
	}
	if opt.PreallocBytes <= 0 {
		opt.PreallocBytes = def.PreallocBytes
	}
	if opt.SyncBytes <= 0 {
		opt.SyncBytes = def.SyncBytes
	}
	if opt.SegmentBytes <= 0 {
		opt.SegmentBytes = def.SegmentBytes
	}
	body := opt.MessageBytes * opt.FrameMessages
	if body > idealFrameBytesMax {
		return nil, fmt.Errorf("bench: ideal broker: a frame of %d bytes exceeds %d", body, idealFrameBytesMax)
	}
	if opt.MessageBytes > idealSourceBytes {
		return nil, fmt.Errorf("bench: ideal broker: messages of %d bytes exceed %d", opt.MessageBytes, idealSourceBytes)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	type served struct {
		frames int64
		last   time.Time
		cpuNs  int64
		err    error
	}
	done := make(chan served, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- served{err: err}
			return
		}
		defer c.Close()
		s, err := newIdealServer(opt)
		if err != nil {
			done <- served{err: err}
			return
		}
		frames, last, cpu, err := s.serve(c, body)
		done <- served{frames, last, cpu, err}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return nil, err
	}
	start := time.Now()
	clientCPU, sendErr := idealClient(ctx, c.(*net.TCPConn), opt, start)
	s := <-done
	if err := errors.Join(sendErr, s.err); err != nil {
		return nil, fmt.Errorf("bench: ideal broker: %w", err)
	}
	msgs := s.frames * int64(opt.FrameMessages)
	r := &IdealResult{Messages: msgs, Bytes: msgs * int64(opt.MessageBytes), Elapsed: s.last.Sub(start),
		ServerCPUNs: s.cpuNs, ClientCPUNs: clientCPU}
	r.ServerCPUPerMsgNs, r.ClientCPUPerMsgNs = r.CPUPerMessageNs(), r.ClientCPUPerMessageNs()
	return r, nil
}

// idealClient builds frames and writes them to c until opt.Time (or
// opt.BytesMax) is reached, then closes its side. It returns its
// thread's CPU time.
func idealClient(ctx context.Context, c *net.TCPConn, opt IdealOptions, start time.Time) (cpuNs int64, err error) {
	runtime.LockOSThread() // thread CPU time measures this thread alone
	defer runtime.UnlockOSThread()
	cpu0 := threadCPU()
	defer func() { cpuNs = threadCPU() - cpu0 }()
	return 0, idealSend(ctx, c, opt, start)
}

// idealSend is idealClient's loop.
func idealSend(ctx context.Context, c *net.TCPConn, opt IdealOptions, start time.Time) error {
	defer c.Close()
	src := idealSource()
	body := opt.MessageBytes * opt.FrameMessages
	frame := make([]byte, idealFrameHeaderBytes+body)
	var k uint64
	var sent int64
	for time.Since(start) < opt.Time && ctx.Err() == nil && (opt.BytesMax <= 0 || sent < opt.BytesMax) {
		b := frame[idealFrameHeaderBytes:]
		for i := 0; i < opt.FrameMessages; i++ {
			idealMessage(b[i*opt.MessageBytes:(i+1)*opt.MessageBytes], src, k)
			k++
		}
		binary.BigEndian.PutUint32(frame, uint32(body))
		binary.BigEndian.PutUint32(frame[4:], crc32.Checksum(b, idealCRC))
		if _, err := c.Write(frame); err != nil {
			return err
		}
		sent += int64(body)
	}
	return c.CloseWrite()
}

// idealSegment is one file of the ideal broker's log.
type idealSegment struct {
	fd    int
	path  string
	size  int64 // bytes written
	alloc int64 // bytes preallocated
}

// syncReq asks the syncer to sync seg and drop its pages up to upTo; with
// last, seg is complete: truncate it to upTo, close it and (unless kept)
// delete it.
type syncReq struct {
	seg  *idealSegment
	upTo int64
	last bool
}

// idealServer is the server's state: the active segment and the syncer.
type idealServer struct {
	opt    IdealOptions
	seg    *idealSegment
	base   int64 // the log offset of the active segment's first byte
	synced int64 // the active segment's size at the last sync request
	reqs   chan syncReq
	wg     sync.WaitGroup
	cpuNs  int64 // the syncer's thread CPU, set when it exits
	errMu  sync.Mutex
	err    error
}

func newIdealServer(opt IdealOptions) (*idealServer, error) {
	s := &idealServer{opt: opt, reqs: make(chan syncReq, 64)}
	if err := s.roll(); err != nil {
		return nil, err
	}
	s.wg.Add(1)
	go s.syncer()
	return s, nil
}

// roll opens a new active segment (handing the full one to the syncer).
func (s *idealServer) roll() error {
	if s.seg != nil {
		s.reqs <- syncReq{seg: s.seg, upTo: s.seg.size, last: true}
		s.base += s.seg.size
	}
	path := filepath.Join(s.opt.Dir, fmt.Sprintf("corestream-ideal-%020d.log", s.base))
	fd, err := unix.Open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return err
	}
	s.seg, s.synced = &idealSegment{fd: fd, path: path}, 0
	return nil
}

// serve reads frames from c until it closes and appends them; it returns
// the frames written, when the last write ended, and its threads' CPU.
func (s *idealServer) serve(c net.Conn, body int) (frames int64, last time.Time, cpuNs int64, err error) {
	runtime.LockOSThread() // thread CPU time measures this thread alone
	defer runtime.UnlockOSThread()
	cpu0 := threadCPU()
	defer func() {
		s.reqs <- syncReq{seg: s.seg, upTo: s.seg.size, last: true}
		close(s.reqs)
		s.wg.Wait()
		cpuNs = threadCPU() - cpu0 + s.cpuNs
		err = errors.Join(err, s.err)
	}()
	buf := make([]byte, idealReadBytes)
	have := 0
	for {
		n, rerr := c.Read(buf[have:])
		have += n
		off := 0
		for have-off >= idealFrameHeaderBytes {
			l := int(binary.BigEndian.Uint32(buf[off:]))
			if l != body {
				return frames, last, 0, fmt.Errorf("%w: body of %d bytes at frame %d, want %d", ErrIdealCorrupt, l, frames, body)
			}
			end := off + idealFrameHeaderBytes + l
			if end > have {
				break
			}
			if crc32.Checksum(buf[off+idealFrameHeaderBytes:end], idealCRC) != binary.BigEndian.Uint32(buf[off+4:]) {
				return frames, last, 0, fmt.Errorf("%w: CRC mismatch at frame %d", ErrIdealCorrupt, frames)
			}
			off = end
			frames++
		}
		if off > 0 {
			if err := s.append(buf[:off]); err != nil {
				return frames, last, 0, err
			}
			last = time.Now()
			have = copy(buf, buf[off:have])
		}
		switch {
		case rerr == io.EOF && have == 0:
			return frames, last, 0, nil
		case rerr == io.EOF:
			return frames, last, 0, fmt.Errorf("%w: %d bytes of a frame left at the end", ErrIdealCorrupt, have)
		case rerr != nil:
			return frames, last, 0, rerr
		}
	}
}

// append writes b to the log with one write, preallocating ahead and
// asking for a sync every SyncBytes.
func (s *idealServer) append(b []byte) error {
	if s.seg.size >= s.opt.SegmentBytes {
		if err := s.roll(); err != nil {
			return err
		}
	}
	g := s.seg
	if end := g.size + int64(len(b)); end > g.alloc {
		n := max(s.opt.PreallocBytes, end-g.alloc)
		if err := unix.Fallocate(g.fd, 0, g.alloc, n); err != nil {
			return fmt.Errorf("fallocate %s: %w", g.path, err)
		}
		g.alloc += n
	}
	for len(b) > 0 {
		n, err := unix.Pwrite(g.fd, b, g.size)
		if err != nil {
			return fmt.Errorf("write %s: %w", g.path, err)
		}
		b, g.size = b[n:], g.size+int64(n)
	}
	if g.size-s.synced >= s.opt.SyncBytes {
		select {
		case s.reqs <- syncReq{seg: g, upTo: g.size}:
			s.synced = g.size
		default: // the syncer is behind: the next request covers this range
		}
	}
	return nil
}

// syncer syncs and drops written pages, and closes full segments, on its
// own locked thread (so that its CPU time can be counted).
func (s *idealServer) syncer() {
	defer s.wg.Done()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0 := threadCPU()
	dropped := map[*idealSegment]int64{}
	for r := range s.reqs {
		g := r.seg
		err := unix.Fdatasync(g.fd)
		if err == nil && r.upTo > dropped[g] {
			err = unix.Fadvise(g.fd, dropped[g], r.upTo-dropped[g], unix.FADV_DONTNEED)
			dropped[g] = r.upTo
		}
		if r.last {
			delete(dropped, g)
			err = errors.Join(err, unix.Ftruncate(g.fd, r.upTo), unix.Close(g.fd))
			if !s.opt.Keep {
				err = errors.Join(err, os.Remove(g.path))
			}
		}
		if err != nil {
			s.errMu.Lock()
			s.err = errors.Join(s.err, fmt.Errorf("sync %s: %w", g.path, err))
			s.errMu.Unlock()
		}
	}
	s.cpuNs = threadCPU() - cpu0
}

// threadCPU returns the calling thread's CPU time in nanoseconds.
func threadCPU() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}
