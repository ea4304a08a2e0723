package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The two-process round trip: the loopback ping-pong of probeRTT with the
// answering side in another process (`corestream bench echo`), both sides
// in plain blocking read and write calls on one OS thread each. probeRTT's
// two goroutines share one Go scheduler, which spins instead of sleeping
// between a request and its answer (4.3 µs p50 on the 2-vCPU VM); any
// broker is another process, whose thread sleeps in the kernel and is
// woken there: 7.5 µs p50 with both sides on one CPU, 80 µs on two (an
// idle vCPU halts, and waking it costs 35–40 µs on that VM). These are
// the floors a one-message-at-a-time produce is read against.

// Bounds of the two-process round trip.
const (
	// echoStartTimeout bounds the echo process's start and connection:
	// exec of a large binary on a loaded 2-core machine.
	echoStartTimeout = 10 * time.Second
	// echoAnswerTimeout bounds each read on either side (SO_RCVTIMEO): an
	// echo that stops answering fails the probe instead of hanging it.
	echoAnswerTimeout = 5 * time.Second
	// echoExitTimeout is how long the echo gets to exit once its
	// connection is closed before it is killed.
	echoExitTimeout = 5 * time.Second
	// echoRoundsMax bounds the echo's loop (the probe stops at
	// rttRoundsMax).
	echoRoundsMax = 2 * rttRoundsMax
	// echoStderrBytesMax bounds the echo's output kept for an error.
	echoStderrBytesMax = 4 << 10
)

// ErrEchoTimeout is returned when a side of the two-process round trip
// waited echoAnswerTimeout for the other.
var ErrEchoTimeout = errors.New("bench: echo: no answer in time")

// EchoOptions configure ServeEcho, the answering side of the two-process
// round trip.
type EchoOptions struct {
	// Addr is the probe's listener, an IPv4 "host:port".
	Addr string
	// CPU, when not negative, pins the answering thread to that CPU.
	CPU int
}

// ServeEcho connects to opt.Addr and answers every 1 KiB request with 8
// bytes, with blocking system calls on one locked OS thread, until the
// probe closes the connection (then it returns nil).
func ServeEcho(opt EchoOptions) error {
	ap, err := netip.ParseAddrPort(opt.Addr)
	if err != nil || !ap.Addr().Is4() {
		return fmt.Errorf("bench: echo: %q is not an IPv4 host:port", opt.Addr)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if opt.CPU >= 0 {
		if err := pinThread(opt.CPU); err != nil {
			return fmt.Errorf("bench: echo: %w", err)
		}
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bench: echo: socket: %w", err)
	}
	defer unix.Close(fd)
	if err := tuneSocket(fd); err != nil {
		return fmt.Errorf("bench: echo: %w", err)
	}
	if err := connectBlocking(fd, &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}); err != nil {
		return fmt.Errorf("bench: echo: connect %s: %w", opt.Addr, err)
	}
	req, ans := make([]byte, rttRequestBytes), make([]byte, rttAnswerBytes)
	for range echoRoundsMax {
		n, err := readFull(fd, req)
		switch {
		case n == 0 && err == io.EOF:
			return nil
		case err != nil:
			return fmt.Errorf("bench: echo: read: %w", err)
		}
		if err := writeFull(fd, ans); err != nil {
			return fmt.Errorf("bench: echo: write: %w", err)
		}
	}
	return fmt.Errorf("bench: echo: answered %d requests, its bound", echoRoundsMax)
}

// EchoCommand is the command line that starts bin's answering side of
// the two-process round trip (ProbeOptions.EchoCmd).
func EchoCommand(bin string) []string { return []string{bin, "bench", "echo"} }

// procRTTOptions configure probeProcRTT.
type procRTTOptions struct {
	// Cmd starts the echo: Cmd, then "--connect ADDR" and, pinned,
	// "--cpu N", are its arguments.
	Cmd []string
	// Time bounds the measurement.
	Time time.Duration
	// CPUs, when set, pins this side's thread to CPUs[0] and the echo's
	// to CPUs[1].
	CPUs []int
	// startTimeout bounds the echo's start and connection; 0:
	// echoStartTimeout.
	startTimeout time.Duration
	// started, when set, is told the echo's process id (tests).
	started func(pid int)
}

// probeProcRTT measures the two-process round trip: it starts the echo,
// accepts its connection, sends a request and waits for its answer, one
// at a time, for opt.Time, and returns the latencies. The echo has exited
// (or been killed and reaped) when it returns, whatever happened.
func probeProcRTT(ctx context.Context, opt procRTTOptions) (_ *Summary, err error) {
	if len(opt.Cmd) == 0 {
		return nil, errors.New("bench: two-process round trip: no echo command")
	}
	lfd, addr, err := listenLoopback()
	if err != nil {
		return nil, err
	}
	defer unix.Close(lfd)
	args := append(append([]string(nil), opt.Cmd[1:]...), "--connect", addr)
	if len(opt.CPUs) == 2 {
		args = append(args, "--cpu", strconv.Itoa(opt.CPUs[1]))
	}
	out := &cappedBuffer{max: echoStderrBytesMax}
	cmd := exec.Command(opt.Cmd[0], args...)
	cmd.Stdout, cmd.Stderr = out, out
	// No Pdeathsig: it fires when the forking thread exits, and the
	// pinned side's thread exits with its goroutine (it may be this
	// one). The echo ends with its connection instead: it reads EOF
	// when this process closes it or dies, and finds no listener if
	// this process dies before it connects.
	cmd.WaitDelay = echoExitTimeout
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: starting the echo: %w", err)
	}
	if opt.started != nil {
		opt.started(cmd.Process.Pid)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	cfd := -1
	defer func() {
		// Closing the connection ends the echo; one that does not end is
		// killed. Either way it is reaped before the probe returns.
		grace := echoExitTimeout
		if cfd >= 0 {
			unix.Close(cfd)
		} else { // it never connected: nothing will end it
			grace = 0
		}
		select {
		case <-exited:
		case <-time.After(grace):
			cmd.Process.Kill()
			<-exited
		}
		if err == nil && waitErr != nil {
			err = fmt.Errorf("bench: the echo: %w: %s", waitErr, out.String())
		}
	}()
	if opt.startTimeout <= 0 {
		opt.startTimeout = echoStartTimeout
	}
	cfd, err = acceptWithin(lfd, opt.startTimeout, exited)
	if err != nil {
		return nil, fmt.Errorf("bench: the echo did not connect: %w: %s", err, strings.TrimSpace(out.String()))
	}
	if err := tuneSocket(cfd); err != nil {
		return nil, err
	}
	type result struct {
		s   *Summary
		err error
	}
	got := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		if len(opt.CPUs) == 2 {
			// The pinned thread is never unlocked: it exits with this
			// goroutine, and its affinity with it.
			if err := pinThread(opt.CPUs[0]); err != nil {
				got <- result{err: err}
				return
			}
		} else {
			defer runtime.UnlockOSThread()
		}
		s, err := pingPong(ctx, cfd, opt.Time)
		got <- result{s, err}
	}()
	r := <-got
	if r.err != nil {
		return nil, fmt.Errorf("bench: two-process round trip: %w", r.err)
	}
	return r.s, ctx.Err()
}

// pingPong sends a request on fd and waits for its answer, one at a time,
// for d (at most rttRoundsMax), and returns the round trips' latencies.
func pingPong(ctx context.Context, fd int, d time.Duration) (*Summary, error) {
	req, ans := make([]byte, rttRequestBytes), make([]byte, rttAnswerBytes)
	lat := newLatencies()
	start := time.Now()
	for i := 0; i < rttRoundsMax && time.Since(start) < d && ctx.Err() == nil; i++ {
		t := time.Now()
		if err := writeFull(fd, req); err != nil {
			return nil, err
		}
		if _, err := readFull(fd, ans); err != nil {
			return nil, err
		}
		lat.record(int64(time.Since(t)))
	}
	return lat.summary(), nil
}

// twoCPUs returns the first two CPUs this thread may run on, or nil when
// it may run on fewer than two.
func twoCPUs() []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil
	}
	var cpus []int
	for c := 0; c < len(set)*64 && len(cpus) < 2; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	if len(cpus) < 2 {
		return nil
	}
	return cpus
}

// pinThread pins the calling OS thread to cpu.
// REQUIRES: the goroutine is locked to its thread.
func pinThread(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pinning to CPU %d: %w", cpu, err)
	}
	return nil
}

// listenLoopback opens a blocking listening socket on 127.0.0.1 and a
// free port, and returns it and its address.
func listenLoopback() (int, string, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, "", fmt.Errorf("bench: socket: %w", err)
	}
	sa := &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}
	if err := errors.Join(unix.Bind(fd, sa), unix.Listen(fd, 1)); err != nil {
		unix.Close(fd)
		return -1, "", fmt.Errorf("bench: listening on loopback: %w", err)
	}
	got, err := unix.Getsockname(fd)
	in4, ok := got.(*unix.SockaddrInet4)
	if err != nil || !ok {
		unix.Close(fd)
		return -1, "", fmt.Errorf("bench: the listener's address: %v", err)
	}
	return fd, fmt.Sprintf("127.0.0.1:%d", in4.Port), nil
}

// acceptWithin accepts one connection on lfd within timeout; it gives up
// early when exited closes (the peer process is gone).
func acceptWithin(lfd int, timeout time.Duration, exited <-chan struct{}) (int, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return -1, errors.New("it exited")
		default:
		}
		fds := []unix.PollFd{{Fd: int32(lfd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 50) // ms: how soon an exit is noticed
		if err == unix.EINTR || n == 0 {
			continue
		}
		if err != nil {
			return -1, err
		}
		fd, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
		if err == unix.EINTR || err == unix.EAGAIN {
			continue
		}
		return fd, err
	}
	return -1, fmt.Errorf("not within %v", timeout)
}

// connectBlocking connects the blocking socket fd to sa. A connect
// interrupted by a signal goes on in the background: it waits for it.
func connectBlocking(fd int, sa unix.Sockaddr) error {
	err := unix.Connect(fd, sa)
	if err != unix.EINTR {
		return err
	}
	deadline := time.Now().Add(echoStartTimeout)
	for time.Now().Before(deadline) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		if n, err := unix.Poll(fds, 50); err == unix.EINTR || n == 0 {
			continue
		} else if err != nil {
			return err
		}
		soErr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if err != nil {
			return err
		}
		if soErr != 0 {
			return unix.Errno(soErr)
		}
		return nil
	}
	return fmt.Errorf("not within %v", echoStartTimeout)
}

// tuneSocket turns Nagle off and bounds every read by echoAnswerTimeout.
func tuneSocket(fd int) error {
	tv := unix.NsecToTimeval(int64(echoAnswerTimeout))
	return errors.Join(unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1),
		unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv))
}

// readFull reads len(b) bytes from the blocking socket fd. It returns
// io.EOF when the peer closed before the first byte, io.ErrUnexpectedEOF
// after it, and ErrEchoTimeout when a read waited echoAnswerTimeout.
func readFull(fd int, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := unix.Read(fd, b[n:])
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return n, ErrEchoTimeout
		case err != nil:
			return n, err
		case m == 0 && n == 0:
			return 0, io.EOF
		case m == 0:
			return n, io.ErrUnexpectedEOF
		}
		n += m
	}
	return n, nil
}

// writeFull writes all of b to the blocking socket fd.
func writeFull(fd int, b []byte) error {
	for len(b) > 0 {
		m, err := unix.Write(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		b = b[m:]
	}
	return nil
}

// cappedBuffer keeps the first max bytes written to it (the echo's
// output, for an error message).
type cappedBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.max - len(c.b); room > 0 {
		c.b = append(c.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (c *cappedBuffer) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.b)
}
