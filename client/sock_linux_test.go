package client

import (
	"errors"
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// capRetransmit caps a TCP connection's retransmission timeout; a
// negative cap leaves the kernel's.
func TestCapRetransmit(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, c := range []struct {
		d    time.Duration
		want int
	}{{-1, 120000}, {time.Second, 1000}, {3 * time.Second, 3000}} {
		nc, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		capRetransmit(nc, c.d)
		rc, _ := nc.(*net.TCPConn).SyscallConn()
		var got int
		var gerr error
		rc.Control(func(fd uintptr) { got, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_RTO_MAX_MS) })
		nc.Close()
		if errors.Is(gerr, unix.ENOPROTOOPT) {
			t.Skip("the kernel has no TCP_RTO_MAX_MS (before Linux 6.11)")
		}
		if gerr != nil || got != c.want {
			t.Errorf("cap %v: TCP_RTO_MAX_MS %d (%v), want %d", c.d, got, gerr, c.want)
		}
	}
	if cfg := (Config{}).withDefaults(); cfg.RetransmitBackoffMax != time.Second {
		t.Errorf("default cap %v, want 1 s", cfg.RetransmitBackoffMax)
	}
	if cfg := (Config{RetransmitBackoffMax: -1}).withDefaults(); cfg.RetransmitBackoffMax >= 0 {
		t.Errorf("a negative cap became %v", cfg.RetransmitBackoffMax)
	}
}
