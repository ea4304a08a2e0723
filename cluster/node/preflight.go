package node

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/corestream/corestream/netio"
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

// listeners are the node's sockets, bound at the very start of Start
// before anything is written or any shard runs, and handed to their
// servers once those exist. Binding them for real (not probing and
// closing) leaves no window in which another process could take a port
// between the check and the listen; connections that arrive meanwhile
// wait in the kernel's accept queue.
type listeners struct {
	client, replication *netio.Listener // replication is nil on a single node
	kafka               *netio.Listener // nil when node.kafka_addr is empty
	http                net.Listener    // nil when node.http_addr is empty
}

// closeUnserved closes every listener no server took (a failed start);
// those already served are closed by their servers.
func (l *listeners) closeUnserved() {
	if l.client != nil {
		l.client.Close()
	}
	if l.replication != nil {
		l.replication.Close()
	}
	if l.kafka != nil {
		l.kafka.Close()
	}
	if l.http != nil {
		l.http.Close()
		l.http = nil
	}
}

// preflight checks what Start needs before it changes anything: it binds
// every listening address and checks that the data directory is usable and
// not another node's.
// On success the caller serves each listener, and calls closeUnserved if
// the start fails later.
func (n *Node) preflight() (*listeners, error) {
	ls := &listeners{}
	inUse := func(key, addr string, err error) error {
		ls.closeUnserved()
		if errors.Is(err, netio.ErrAddrInUse) {
			return fmt.Errorf("%w: %s %s is already in use by another process (another corestream node?); stop it or choose another port. Nothing was started or written",
				ErrAddressInUse, key, addr)
		}
		return fmt.Errorf("node: %s %s: %w. Nothing was started or written", key, addr, err)
	}
	var err error
	if ls.client, err = netio.Bind(n.cfg.Node.ClientAddr); err != nil {
		return nil, inUse("node.client_addr", n.cfg.Node.ClientAddr, err)
	}
	if n.clustered() {
		if ls.replication, err = netio.Bind(n.cfg.Node.ReplicationAddr); err != nil {
			return nil, inUse("node.replication_addr", n.cfg.Node.ReplicationAddr, err)
		}
	}
	if n.cfg.Node.KafkaAddr != "" {
		if ls.kafka, err = netio.Bind(n.cfg.Node.KafkaAddr); err != nil {
			return nil, inUse("node.kafka_addr", n.cfg.Node.KafkaAddr, err)
		}
	}
	if n.cfg.Node.HTTPAddr != "" {
		if ls.http, err = netio.ListenTCP(n.cfg.Node.HTTPAddr); err != nil {
			return nil, inUse("node.http_addr", n.cfg.Node.HTTPAddr, err)
		}
	}
	err = checkDataDir(n.dir)
	if err == nil {
		err = checkIdentity(n.fs, n.dir, int32(n.self))
	}
	if err != nil {
		ls.closeUnserved()
		return nil, fmt.Errorf("%w. Nothing was started or written", err)
	}
	return ls, nil
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
