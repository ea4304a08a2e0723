package harness

import (
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// dialEnv makes the test binary, run as a child, dial the address it
// names and exit 0 when the connection opened (see TestMain).
const dialEnv = "CHAOS_TEST_DIAL"

func TestMain(m *testing.M) {
	if addr := os.Getenv(dialEnv); addr != "" {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			os.Exit(1)
		}
		c.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// dialAs dials addr from a child process running under group gid and
// reports whether the connection opened within a second.
func dialAs(t *testing.T, gid uint32, addr string) bool {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), dialEnv+"="+addr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(os.Geteuid()), Gid: gid, Groups: []uint32{}}}
	err := cmd.Run()
	if _, exit := err.(*exec.ExitError); err != nil && !exit {
		t.Fatal(err)
	}
	return err == nil
}

// dialsWithin reports whether this process (a client: mark 0) can open a
// connection to addr within a second.
func dialsWithin(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// The rules really cut loopback traffic, and only the traffic they name:
// a node cut from its peers cannot reach them, its clients still can; the
// clients cut from a node cannot reach it, and an established connection
// stops carrying data until the heal, then delivers it. Needs root and
// iptables.
func TestNetCutsLoopback(t *testing.T) {
	if err := NetUsable(); err != nil {
		t.Skipf("skipped: %v", err)
	}
	var ls [2]net.Listener
	var nodes []NodePorts
	pid := os.Getpid()
	for i := range ls {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		go func() { // echo on every connection until it closes
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				go func() { io.Copy(c, c); c.Close() }()
			}
		}()
		ls[i] = l
		nodes = append(nodes, NodePorts{ID: i + 1, GID: NodeGID(pid, i+1), Ports: []int{l.Addr().(*net.TCPAddr).Port}})
	}
	n, err := NewNet(nil, pid, nodes)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	a1, a2 := ls[0].Addr().String(), ls[1].Addr().String()
	if !dialAs(t, nodes[0].GID, a2) || !dialsWithin(a1) {
		t.Fatal("no connection before any cut")
	}

	if err := n.Cut(IsolateRules(n.nodePorts(), 1)); err != nil {
		t.Fatal(err)
	}
	if dialAs(t, nodes[0].GID, a2) {
		t.Error("node 1, cut from its peers, reached node 2")
	}
	if !dialsWithin(a1) || !dialsWithin(a2) {
		t.Error("a client could not reach a node when only node 1 was cut from its peers")
	}
	if err := n.Heal(); err != nil {
		t.Fatal(err)
	}
	if !dialAs(t, nodes[0].GID, a2) {
		t.Error("node 1 could not reach node 2 after the heal")
	}

	// An established client connection to node 1 carries nothing while
	// the clients are cut from it, and delivers after the heal.
	c, err := net.Dial("tcp", a1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 1)
	if err := n.Cut(ClientCutRules(n.nodePorts(), 1)); err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("x"))
	c.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := c.Read(buf); err == nil {
		t.Error("an established connection carried data across the cut")
	}
	if dialsWithin(a1) {
		t.Error("a client reached node 1 while the clients were cut from it")
	}
	if !dialsWithin(a2) || !dialAs(t, nodes[1].GID, a1) {
		t.Error("the client cut of node 1 cut more than the clients of node 1")
	}
	if err := n.Heal(); err != nil {
		t.Fatal(err)
	}
	if !dialsWithin(a1) {
		t.Error("a client could not reach node 1 after the heal")
	}
	// TCP retransmits the byte sent during the cut: bounded by its
	// backoff after about 2 s of drops.
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(c, buf); err != nil || buf[0] != 'x' {
		t.Errorf("the connection did not deliver after the heal: %q, %v", buf, err)
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if out, _ := ExecIptables("-S"); containsLine(string(out), "-N "+n.Chain()) {
		t.Fatalf("the chain %s is still there after Close", n.Chain())
	}
}

func containsLine(text, line string) bool {
	for _, l := range strings.Split(text, "\n") {
		if l == line {
			return true
		}
	}
	return false
}
