package shard

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// poller is a shard's epoll set: the inbox eventfd (producers write it to
// wake a parked shard), a timerfd set to the wheel's next expiry, the
// engine's completion eventfd, and any descriptors the shard's owner watches.
// All methods except wakeup run on the shard's thread.
type poller struct {
	ep     int // epoll descriptor
	wakeFd int // eventfd; written by wakeup
	timeFd int // timerfd (CLOCK_MONOTONIC)
	events []unix.EpollEvent
	buf    [8]byte
	// armedAt is the absolute CLOCK_MONOTONIC deadline the timerfd is set
	// to, or 0 when disarmed; it saves a syscall when it does not change.
	armedAt int64
}

func newPoller() (*poller, error) {
	p := &poller{ep: -1, wakeFd: -1, timeFd: -1, events: make([]unix.EpollEvent, 64)}
	var err error
	if p.ep, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return nil, fmt.Errorf("shard: epoll_create1: %w", err)
	}
	if p.wakeFd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		p.close()
		return nil, fmt.Errorf("shard: eventfd: %w", err)
	}
	if p.timeFd, err = unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC); err != nil {
		p.close()
		return nil, fmt.Errorf("shard: timerfd_create: %w", err)
	}
	if err = p.add(p.wakeFd, unix.EPOLLIN); err != nil {
		p.close()
		return nil, err
	}
	if err = p.add(p.timeFd, unix.EPOLLIN); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

func (p *poller) add(fd int, events uint32) error {
	ev := unix.EpollEvent{Events: events, Fd: int32(fd)}
	if err := unix.EpollCtl(p.ep, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fmt.Errorf("shard: epoll_ctl add fd %d: %w", fd, err)
	}
	return nil
}

func (p *poller) mod(fd int, events uint32) error {
	ev := unix.EpollEvent{Events: events, Fd: int32(fd)}
	if err := unix.EpollCtl(p.ep, unix.EPOLL_CTL_MOD, fd, &ev); err != nil {
		return fmt.Errorf("shard: epoll_ctl mod fd %d: %w", fd, err)
	}
	return nil
}

func (p *poller) del(fd int) error {
	if err := unix.EpollCtl(p.ep, unix.EPOLL_CTL_DEL, fd, nil); err != nil {
		return fmt.Errorf("shard: epoll_ctl del fd %d: %w", fd, err)
	}
	return nil
}

// wait blocks until an event arrives (msec < 0: no timeout) and returns the
// ready events. EINTR returns no events.
func (p *poller) wait(msec int) ([]unix.EpollEvent, error) {
	n, err := unix.EpollWait(p.ep, p.events, msec)
	if err != nil {
		if err == unix.EINTR {
			return nil, nil
		}
		return nil, fmt.Errorf("shard: epoll_wait: %w", err)
	}
	return p.events[:n], nil
}

// wakeup makes the next (or current) wait return. Safe from any goroutine.
func (p *poller) wakeup() {
	one := [8]byte{1, 0, 0, 0, 0, 0, 0, 0} // host order is little endian on every GOARCH we build
	for {
		_, err := unix.Write(p.wakeFd, one[:])
		if err == unix.EINTR {
			continue
		}
		return // EAGAIN: the counter is saturated, a wake is pending anyway
	}
}

// drain resets an eventfd or timerfd counter.
func (p *poller) drain(fd int) {
	_, _ = unix.Read(fd, p.buf[:])
}

// armTimer sets the timerfd to fire at the absolute monotonic time at (ns);
// at <= 0 disarms it.
func (p *poller) armTimer(at int64) error {
	if at == p.armedAt {
		return nil
	}
	var spec unix.ItimerSpec
	if at > 0 {
		spec.Value = unix.NsecToTimespec(at)
	}
	if err := unix.TimerfdSettime(p.timeFd, unix.TFD_TIMER_ABSTIME, &spec, nil); err != nil {
		return fmt.Errorf("shard: timerfd_settime: %w", err)
	}
	p.armedAt = at
	return nil
}

func (p *poller) close() {
	for _, fd := range []int{p.timeFd, p.wakeFd, p.ep} {
		if fd >= 0 {
			_ = unix.Close(fd)
		}
	}
	p.ep, p.wakeFd, p.timeFd = -1, -1, -1
}

// monoNow reads CLOCK_MONOTONIC in nanoseconds (the timerfd's clock).
func monoNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// Clock is the shard's time source. The default reads CLOCK_MONOTONIC; tests
// inject a manual clock. Now returns nanoseconds on the monotonic clock that
// the shard's timerfd uses.
type Clock interface {
	Now() int64
}

// monoClock reads Go's monotonic clock (vDSO, no syscall) shifted onto
// CLOCK_MONOTONIC, which is the clock Go's runtime reads too, so the offset
// measured once stays valid.
type monoClock struct{}

var (
	monoBase   = time.Now()
	monoOffset = monoNow() - int64(time.Since(monoBase))
)

func (monoClock) Now() int64 { return int64(time.Since(monoBase)) + monoOffset }
