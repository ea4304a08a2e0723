package netio

import (
	"errors"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// tuneSocket caps TCP's retransmission timeout when asked, and leaves the
// kernel's cap otherwise.
func TestTuneSocketCapsRetransmission(t *testing.T) {
	for _, c := range []struct {
		max  time.Duration
		want int
	}{{0, 120000}, {time.Second, 1000}, {5 * time.Second, 5000}} {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		tuneSocket(fd, &Config{RetransmitBackoffMax: c.max})
		got, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_RTO_MAX_MS)
		unix.Close(fd)
		if errors.Is(err, unix.ENOPROTOOPT) {
			t.Skip("the kernel has no TCP_RTO_MAX_MS (before Linux 6.11)")
		}
		if err != nil || got != c.want {
			t.Errorf("RetransmitBackoffMax %v: TCP_RTO_MAX_MS %d (%v), want %d", c.max, got, err, c.want)
		}
	}
}
