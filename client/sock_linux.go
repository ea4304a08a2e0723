package client

import (
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// capRetransmit caps TCP's retransmission timeout of nc at d
// (TCP_RTO_MAX_MS): after a network cut heals, a connection retransmits
// within d instead of after a backoff of up to the kernel's 120 s. It does
// nothing for d <= 0, for connections that are not TCP, and on kernels
// before 6.11 (which refuse the option).
func capRetransmit(nc net.Conn, d time.Duration) {
	tc, ok := nc.(*net.TCPConn)
	if !ok || d <= 0 {
		return
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_RTO_MAX_MS, int(d/time.Millisecond))
	})
}
