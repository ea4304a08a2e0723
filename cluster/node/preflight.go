package node

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// ErrAddressInUse is returned by Start when a port the node must listen on
// is bound by another process. Start checks every port, and the data
// directory, before it writes anything or opens any listener, so a node
// that cannot run leaves no trace. (It used to create and lock the data
// directory, start its shards and open its client port, and only then
// fail on a busy HTTP port.)
var ErrAddressInUse = errors.New("node: address in use")

// ErrDataDirUnusable is returned by Start when node.data_dir cannot be a
// writable directory: a file is in the way, or the file system is read
// only.
var ErrDataDirUnusable = errors.New("node: data directory unusable")

// reservation holds, between the checks at the start of Start and the
// moment each real listener opens, a plain listener on each fixed port:
// the window in which another process could take one is the few
// microseconds between closing it and opening the real one, not the
// seconds of start-up. (The real listeners open with options a plain one
// does not share, so it must be closed first.)
type reservation struct {
	held map[string]net.Listener
}

// release closes the reservation for addr (no-op when none).
func (r *reservation) release(addr string) {
	if l := r.held[addr]; l != nil {
		l.Close()
		delete(r.held, addr)
	}
}

// releaseAll closes every reservation.
func (r *reservation) releaseAll() {
	for a := range r.held {
		r.release(a)
	}
}

// preflight checks what Start needs before it changes anything: every
// listening address free and the data directory usable. It returns the
// ports it reserved; the caller releases each just before listening on
// it, and all of them when it fails.
func (n *Node) preflight() (*reservation, error) {
	res := &reservation{held: map[string]net.Listener{}}
	addrs := []struct{ key, addr string }{{"node.client_addr", n.cfg.Node.ClientAddr}}
	if n.clustered() {
		addrs = append(addrs, struct{ key, addr string }{"node.replication_addr", n.cfg.Node.ReplicationAddr})
	}
	if n.cfg.Node.HTTPAddr != "" {
		addrs = append(addrs, struct{ key, addr string }{"node.http_addr", n.cfg.Node.HTTPAddr})
	}
	for _, a := range addrs {
		if _, port, err := net.SplitHostPort(a.addr); err == nil && port == "0" {
			continue // the kernel picks a free port at the real listen
		}
		l, err := net.Listen("tcp", a.addr)
		if err != nil {
			res.releaseAll()
			if errors.Is(err, unix.EADDRINUSE) {
				return nil, fmt.Errorf("%w: %s %s is already in use by another process (another corestream node?); stop it or choose another port. Nothing was started or written",
					ErrAddressInUse, a.key, a.addr)
			}
			return nil, fmt.Errorf("node: %s %s: %w. Nothing was started or written", a.key, a.addr, err)
		}
		res.held[a.addr] = l
	}
	if err := checkDataDir(n.dir); err != nil {
		res.releaseAll()
		return nil, fmt.Errorf("%w. Nothing was started or written", err)
	}
	return res, nil
}

// checkDataDir checks, without writing, that dir is a directory this
// process may write, or can be created: its nearest existing ancestor is
// a writable directory. access(2) also reports a read-only file system
// (EROFS), even to root.
func checkDataDir(dir string) error {
	p := filepath.Clean(dir)
	for {
		st, err := os.Stat(p)
		switch {
		case err == nil && !st.IsDir():
			return fmt.Errorf("%w: node.data_dir %s: %s is not a directory", ErrDataDirUnusable, dir, p)
		case err == nil:
			if err := unix.Access(p, unix.W_OK|unix.X_OK); err != nil {
				what := "is not writable"
				if p != filepath.Clean(dir) {
					what = "cannot be created: " + p + " is not writable"
				}
				return fmt.Errorf("%w: node.data_dir %s %s (%v)", ErrDataDirUnusable, dir, what, err)
			}
			return nil
		case !errors.Is(err, os.ErrNotExist) && !errors.Is(err, unix.ENOTDIR):
			return fmt.Errorf("%w: node.data_dir %s: %v", ErrDataDirUnusable, dir, err)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return nil
		}
		p = parent
	}
}
