package netio

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrAddrInUse matches (errors.Is) the error of Server.Listen and ListenTCP
// when another socket, normally another node's, already listens on the
// address. A node reports it before it writes anything: its ports are
// taken, so it cannot serve.
var ErrAddrInUse = errors.New("netio: address already in use")

// AddrInUseError is the error Server.Listen and ListenTCP return when the
// address is taken. It matches ErrAddrInUse and syscall.EADDRINUSE.
type AddrInUseError struct {
	// Addr is the address asked for, as the caller wrote it.
	Addr string
}

// Error names the address and the likely cause.
func (e *AddrInUseError) Error() string {
	return "netio: address " + e.Addr + " is already in use (another corestream node?)"
}

// Is matches ErrAddrInUse and syscall.EADDRINUSE.
func (e *AddrInUseError) Is(target error) bool {
	return target == ErrAddrInUse || target == syscall.EADDRINUSE
}

// ListenTCP opens a listener with Go's net package (for servers built on
// it, such as net/http) and reports a taken address as an *AddrInUseError,
// as Server.Listen does. Go's listeners do not set SO_REUSEPORT, so a
// second bind of the port fails, whoever holds it.
func ListenTCP(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, &AddrInUseError{Addr: addr}
	}
	return ln, err
}

// Listener is a bound, listening socket that no server accepts on yet:
// a node binds its ports with Bind before it does anything else (opens its
// data directory, starts its shards), so that a port another node holds
// stops the start before anything is written, and hands each Listener to
// its Server with Serve once the shards run. Connections that arrive
// meanwhile wait in the kernel's accept queue.
type Listener struct {
	addr *net.TCPAddr // the address bound (with the port chosen for port 0)

	mu sync.Mutex // guards fd: Close may race with a failed start
	fd int        // -1 once Serve took it or Close closed it
}

// Bind binds addr ("host:port"; port 0 picks a free port) and listens on
// it, without serving. The port is bound without SO_REUSEPORT, so a port
// that another socket listens on (another node, another program, whoever
// holds it) is refused with an *AddrInUseError, which matches
// ErrAddrInUse, instead of being shared: with SO_REUSEPORT, a second
// process of the same user bound the port silently and the kernel gave it
// a share of the connections.
func Bind(addr string) (*Listener, error) {
	ta, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("netio: listen %q: %w", addr, err)
	}
	sa, family, err := sockaddr(ta)
	if err != nil {
		return nil, err
	}
	fd, err := listenSocket(sa, family, addr)
	if err != nil {
		return nil, err
	}
	bound, err := unix.Getsockname(fd)
	if err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("netio: listen %s: getsockname: %w", addr, err)
	}
	return &Listener{addr: tcpAddr(bound), fd: fd}, nil
}

// Addr is the address bound, with the port the kernel chose for port 0.
func (l *Listener) Addr() *net.TCPAddr { return l.addr }

// Close closes a listener no server took (a start that failed later).
// After Serve it does nothing: the server closes the socket at Shutdown.
func (l *Listener) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fd < 0 {
		return nil
	}
	err := unix.Close(l.fd)
	l.fd = -1
	return err
}

// take hands the descriptor to a server.
func (l *Listener) take() (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fd < 0 {
		return -1, fmt.Errorf("netio: serve %v: %w", l.addr, ErrListenerClosed)
	}
	fd := l.fd
	l.fd = -1
	return fd, nil
}

// ErrListenerClosed is returned by Server.Serve for a Listener that was
// closed or is already served.
var ErrListenerClosed = errors.New("netio: listener closed or already served")
