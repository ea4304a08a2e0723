package netio

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corestream/corestream/shard"
)

// listenChildEnv, when set in the environment of the test binary, makes it
// a child process that listens on the address it names (listenChild)
// instead of running tests.
const listenChildEnv = "NETIO_TEST_LISTEN_CHILD"

// listenChild runs a two-shard echo server on addr, prints "LISTENING
// <addr>" or "ERROR <error>" on stdout, serves until stdin closes and
// returns the exit code.
func listenChild(addr string) int {
	g, err := shard.NewGroup(shard.Config{Count: 2})
	if err == nil {
		err = g.Start()
	}
	if err != nil {
		fmt.Printf("ERROR %v\n", err)
		return 2
	}
	defer g.Stop()
	srv, err := NewServer(g, Config{}, newTestHandler())
	if err == nil {
		err = srv.Listen(addr)
	}
	if err != nil {
		fmt.Printf("ERROR %v\n", err)
		return 1
	}
	fmt.Printf("LISTENING %s\n", srv.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
	return 0
}

// startListenChild starts the test binary as a listenChild on addr and
// returns the line it printed. The child ends when the test does.
func startListenChild(t *testing.T, addr string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), listenChildEnv+"="+addr)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	lines := make(chan string, 1)
	go func() {
		r := bufio.NewReader(stdout)
		line, _ := r.ReadString('\n')
		lines <- strings.TrimSpace(line)
		_, _ = io.Copy(io.Discard, r)
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Error("listen child did not exit after its stdin closed")
		}
	})
	return recvWithin(t, lines)
}

// echoed checks that n new connections to addr are each served.
func echoed(t *testing.T, addr string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		c := dialT(t, addr)
		c.send(uint64(i), opEcho, []byte("still serving"))
		if corr, _, p := c.mustRecv(); corr != uint64(i) || string(p) != "still serving" {
			t.Fatalf("connection %d: answer %d %q", i, corr, p)
		}
		_ = c.Close()
	}
}

func wantAddrInUse(t *testing.T, err error, addr string) {
	t.Helper()
	if !errors.Is(err, ErrAddrInUse) || !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("second listen on %s: %v, want ErrAddrInUse", addr, err)
	}
	want := "netio: address " + addr + " is already in use (another corestream node?)"
	if err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
}

// newIdleServer is a started group and a server that has not listened.
func newIdleServer(t *testing.T) *Server {
	t.Helper()
	g, err := shard.NewGroup(shard.Config{Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(g, Config{}, newTestHandler())
	if err != nil {
		_ = g.Stop()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = srv.Shutdown(context.Background())
		_ = g.Stop()
	})
	return srv
}

// A port held by one listener is refused to a second one in the same
// process, whichever of the node's listener kinds each is: the netio
// server (client and replication ports) or a Go listener (HTTP). The first
// keeps serving. Before the fix both netio servers bound the port with
// SO_REUSEPORT and split its connections.
func TestSecondListenerOnBusyPortFails(t *testing.T) {
	for _, tc := range []struct {
		name          string
		first, second string // "netio", "go", or "bound" (Bind without Serve)
		wildcardFirst bool   // the first binds 0.0.0.0, the second 127.0.0.1
	}{
		{"netio then netio", "netio", "netio", false},
		{"bound, not yet served, then netio", "bound", "netio", false},
		{"bound, not yet served, then go", "bound", "go", false},
		{"netio on any address then netio", "netio", "netio", true},
		{"netio then go", "netio", "go", false},
		{"go then netio", "go", "netio", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var port int
			switch tc.first {
			case "netio":
				bind := "127.0.0.1:0"
				if tc.wildcardFirst {
					bind = "0.0.0.0:0"
				}
				srv := newIdleServer(t)
				if err := srv.Listen(bind); err != nil {
					t.Fatal(err)
				}
				port = srv.Addr().(*net.TCPAddr).Port
			case "bound":
				l, err := Bind("127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { l.Close() })
				port = l.Addr().Port
			case "go":
				ln, err := ListenTCP("127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { ln.Close() })
				go func() { // a stand-in server: answers every connection with "go"
					for {
						c, err := ln.Accept()
						if err != nil {
							return
						}
						_, _ = c.Write([]byte("go"))
						_ = c.Close()
					}
				}()
				port = ln.Addr().(*net.TCPAddr).Port
			}
			addr := fmt.Sprintf("127.0.0.1:%d", port)
			var err error
			switch tc.second {
			case "netio":
				err = newIdleServer(t).Listen(addr)
			case "go":
				var ln net.Listener
				if ln, err = ListenTCP(addr); err == nil {
					ln.Close()
				}
			}
			wantAddrInUse(t, err, addr)
			switch tc.first {
			case "bound":
				return
			case "netio":
				echoed(t, addr, 10)
				return
			}
			for i := 0; i < 10; i++ {
				c := dialT(t, addr)
				if b, err := io.ReadAll(c); err != nil || string(b) != "go" {
					t.Fatalf("first listener: %q %v", b, err)
				}
			}
		})
	}
}

// The same between two processes (of the same user, which is when
// SO_REUSEPORT used to let them share the port): the second one's Listen
// fails with the clear error and the first keeps serving every new
// connection.
func TestSecondProcessOnBusyPortFails(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	t.Run("child holds the port", func(t *testing.T) {
		line := startListenChild(t, "127.0.0.1:0")
		addr, ok := strings.CutPrefix(line, "LISTENING ")
		if !ok {
			t.Fatalf("child: %q", line)
		}
		wantAddrInUse(t, newIdleServer(t).Listen(addr), addr)
		echoed(t, addr, 20) // only the child can answer
	})
	t.Run("this process holds the port", func(t *testing.T) {
		ts := startServer(t, 2, Config{}, newTestHandler())
		addr := ts.addr()
		line := startListenChild(t, addr)
		want := "ERROR netio: address " + addr + " is already in use (another corestream node?)"
		if line != want {
			t.Fatalf("child: %q, want %q", line, want)
		}
		before := ts.srv.Stats().Accepted.Load()
		echoed(t, addr, 20)
		if got := ts.srv.Stats().Accepted.Load() - before; got != 20 {
			t.Fatalf("this process accepted %d of 20 connections", got)
		}
	})
}

// A node binds its ports first (Bind) and serves them once its shards run
// (Serve): a taken port fails the Bind, before anything else happens; a
// connection that arrives between the two waits and is then served.
func TestBindThenServe(t *testing.T) {
	l, err := Bind("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if _, err := Bind(addr); !errors.Is(err, ErrAddrInUse) {
		t.Fatalf("second Bind: %v", err)
	}
	wantAddrInUse(t, newIdleServer(t).Listen(addr), addr)
	early := dialT(t, addr) // queued by the kernel until Serve
	early.send(1, opEcho, []byte("early"))

	srv := newIdleServer(t)
	if err := srv.Serve(l); err != nil {
		t.Fatal(err)
	}
	if srv.Addr().String() != addr {
		t.Fatalf("serving %v, bound %s", srv.Addr(), addr)
	}
	if corr, _, p := early.mustRecv(); corr != 1 || string(p) != "early" {
		t.Fatalf("early connection: %d %q", corr, p)
	}
	echoed(t, addr, 5)
	if err := l.Close(); err != nil {
		t.Fatalf("Close after Serve: %v", err)
	}
	if err := newIdleServer(t).Serve(l); !errors.Is(err, ErrListenerClosed) {
		t.Fatalf("serving a listener twice: %v", err)
	}
	echoed(t, addr, 1) // the first server still has it

	closed, err := Bind("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	freed := closed.Addr().String()
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := Bind(freed) // a closed listener frees its port
	if err != nil {
		t.Fatalf("bind after close: %v", err)
	}
	_ = again.Close()
}
