package netio

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// listenBacklog is the accept queue length asked of each listener (the
// kernel caps it at net.core.somaxconn).
const listenBacklog = 4096

// sockaddr converts a resolved TCP address to a socket address and family.
func sockaddr(a *net.TCPAddr) (unix.Sockaddr, int, error) {
	if ip4 := a.IP.To4(); ip4 != nil || a.IP == nil {
		sa := &unix.SockaddrInet4{Port: a.Port}
		if ip4 != nil {
			copy(sa.Addr[:], ip4)
		}
		return sa, unix.AF_INET, nil
	}
	if ip6 := a.IP.To16(); ip6 != nil {
		sa := &unix.SockaddrInet6{Port: a.Port}
		copy(sa.Addr[:], ip6)
		if a.Zone != "" {
			ifi, err := net.InterfaceByName(a.Zone)
			if err != nil {
				return nil, 0, fmt.Errorf("netio: zone %q: %w", a.Zone, err)
			}
			sa.ZoneId = uint32(ifi.Index)
		}
		return sa, unix.AF_INET6, nil
	}
	return nil, 0, fmt.Errorf("netio: unsupported address %v", a)
}

// tcpAddr converts a socket address back to a *net.TCPAddr (nil when the
// family is unknown).
func tcpAddr(sa unix.Sockaddr) *net.TCPAddr {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return &net.TCPAddr{IP: append(net.IP(nil), sa.Addr[:]...), Port: sa.Port}
	case *unix.SockaddrInet6:
		a := &net.TCPAddr{IP: append(net.IP(nil), sa.Addr[:]...), Port: sa.Port}
		if sa.ZoneId != 0 {
			if ifi, err := net.InterfaceByIndex(int(sa.ZoneId)); err == nil {
				a.Zone = ifi.Name
			}
		}
		return a
	}
	return nil
}

// listenSocket opens the server's one listening socket on sa (addr is the
// address as the caller wrote it, for errors): non-blocking, with
// SO_REUSEADDR so that a restarted node binds while its old connections
// linger in TIME_WAIT, and deliberately without SO_REUSEPORT. With
// SO_REUSEPORT a second process of the same user binds the same port
// without an error and the kernel then hands it a share of the
// connections; without it the kernel refuses the second bind (EADDRINUSE),
// which Listen reports as an *AddrInUseError. The shards share this one
// socket (Server.Listen); see docs/design/threading.md.
func listenSocket(sa unix.Sockaddr, family int, addr string) (int, error) {
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("netio: listen %s: socket: %w", addr, err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		_ = unix.Close(fd)
		return -1, fmt.Errorf("netio: listen %s: setsockopt SO_REUSEADDR: %w", addr, err)
	}
	if err := unix.Bind(fd, sa); err != nil {
		_ = unix.Close(fd)
		return -1, bindError(addr, err)
	}
	if err := unix.Listen(fd, listenBacklog); err != nil {
		_ = unix.Close(fd)
		if err == unix.EADDRINUSE { // a racing bind of the same port (rare)
			return -1, &AddrInUseError{Addr: addr}
		}
		return -1, fmt.Errorf("netio: listen %s: %w", addr, err)
	}
	return fd, nil
}

// bindError turns a bind(2) failure into an error an operator can act on.
func bindError(addr string, err error) error {
	switch err {
	case unix.EADDRINUSE:
		return &AddrInUseError{Addr: addr}
	case unix.EADDRNOTAVAIL:
		return fmt.Errorf("netio: cannot listen on %s: no network interface of this host has that address: %w", addr, err)
	case unix.EACCES:
		return fmt.Errorf("netio: cannot listen on %s: ports below 1024 need privileges (CAP_NET_BIND_SERVICE): %w", addr, err)
	}
	return fmt.Errorf("netio: cannot listen on %s: %w", addr, err)
}

// dupListener gives a shard its own descriptor for the shared listening
// socket, so that each shard can watch and close its own: the socket stays
// open until the last shard closes its descriptor.
func dupListener(fd int) (int, error) {
	nfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("netio: dup listener: %w", err)
	}
	return nfd, nil
}

// tuneSocket applies the per-connection options: no Nagle delay (responses
// are written whole, and latency matters more than segment count), and the
// configured kernel buffer sizes.
func tuneSocket(fd int, cfg *Config) {
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	if cfg.SocketRecvBufferBytes > 0 {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, cfg.SocketRecvBufferBytes)
	}
	if cfg.SocketSendBufferBytes > 0 {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, cfg.SocketSendBufferBytes)
	}
	if cfg.RetransmitBackoffMax > 0 {
		// ENOPROTOOPT before Linux 6.11: the kernel's cap stays.
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_RTO_MAX_MS, int(cfg.RetransmitBackoffMax/time.Millisecond))
	}
}

// resolveLiteral parses "ip:port" without a name lookup (which would block
// the shard's thread). ok is false when host is not an IP literal.
func resolveLiteral(addr string) (a *net.TCPAddr, ok bool, err error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, false, fmt.Errorf("netio: address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, false, fmt.Errorf("netio: address %q: bad port", addr)
	}
	host, zone, _ := strings.Cut(host, "%")
	ip := net.ParseIP(host)
	if host != "" && ip == nil {
		return nil, false, nil
	}
	return &net.TCPAddr{IP: ip, Port: port, Zone: zone}, true, nil
}
