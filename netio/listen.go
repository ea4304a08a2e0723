package netio

import (
	"errors"
	"net"
	"syscall"
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
