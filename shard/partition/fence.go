package partition

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/checkpoint"
)

// A replica is fenced when its group lost entries it knows committed.
// Under storage.fsync = "never" (or "interval", "messages") a replica
// acknowledges what is in the page cache, so a power loss that takes a
// majority of a group's nodes can take entries the group committed; the
// survivors elect a primary whose log no longer has them and which writes
// new entries at their offsets. A replica that still knows them committed
// (it kept running) gets an append that would replace them: consensus
// refuses it (raftlite.ErrCommittedLost) and the replica fences itself
// instead of failing the node with a panic, as the assertion does for a
// durable log. Fenced, it keeps its log untouched (the only copy of what
// the group lost), answers every request with ErrStorage naming the
// cause, and records the fence durably in its directory, so that it
// refuses to open again (ErrFenced) until an operator removes the
// directory: the node then copies the partition from its peers.

// ErrFenced is returned by Open for a replica whose directory records
// that its group lost committed entries (see above), and wraps the cause
// a fenced replica's requests are answered with. The error says which
// partition, under which fsync policy, and what to do.
var ErrFenced = errors.New("partition: replica fenced")

// The fence record: payload version 1, the message the replica refuses
// to open with.
var fenceKind = checkpoint.Kind{'F', 'E', 'N', 'C'}

const fenceFile = "fenced.checkpoint"

// fenceMessageBytesMax bounds the recorded message.
const fenceMessageBytesMax = 4096

// checkFence returns ErrFenced with the recorded cause when the replica's
// directory holds a fence record, nil when it does not.
func checkFence(cfg *Config) error {
	v, p, err := checkpoint.Read(cfg.FS, filepath.Join(cfg.Dir, fenceFile), fenceKind)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("%w: partition %s/%d: its fence record %s cannot be read (%v); remove the directory %s so that the node copies the partition from its peers",
			ErrFenced, cfg.Topic, cfg.Partition, fenceFile, err, strings.Join(append([]string{cfg.Dir}, cfg.FenceAlsoRemove...), " and "))
	case v != 1:
		return fmt.Errorf("%w: partition %s/%d: fence record version %d", ErrFenced, cfg.Topic, cfg.Partition, v)
	}
	return fmt.Errorf("%w: %s", ErrFenced, p)
}

// fenceMessage says what happened to the replica and what to do.
func fenceMessage(cfg *Config, cause error) string {
	what := "the replica's directory " + cfg.Dir
	if len(cfg.FenceAlsoRemove) > 0 {
		what = fmt.Sprintf("the replica's directory %s and %s", cfg.Dir, strings.Join(cfg.FenceAlsoRemove, " and "))
	}
	msg := fmt.Sprintf("partition %s/%d on node %d: its group lost entries this replica knows committed (%v): "+
		"a majority of its replicas lost writes they had acknowledged, which storage.fsync = %q allows on a power loss. "+
		"This replica keeps its log, which holds what the group lost, and serves nothing. To rejoin the group, "+
		"remove (or move away, to keep the lost entries) %s; the node then copies the partition from its peers",
		cfg.Topic, cfg.Partition, cfg.Self, cause, cfg.Log.Fsync, what)
	if len(msg) > fenceMessageBytesMax {
		msg = msg[:fenceMessageBytesMax]
	}
	return msg
}

// fence stops the replica for good after consensus refused a message
// with raftlite.ErrCommittedLost (cause): waiting requests fail with
// ErrStorage, the consensus node is dropped, the fence is recorded, and
// the host is told (it closes the replica after this round). It returns
// the ErrFenced error. A durable log never gets here: raftlite's
// assertion fails first.
func (r *Replica) fence(cause error) error {
	msg := fenceMessage(&r.cfg, cause)
	if err := checkpoint.Write(r.cfg.FS, filepath.Join(r.cfg.Dir, fenceFile), fenceKind, 1, []byte(msg)); err != nil {
		// Not recorded: the next open starts a consensus node that would
		// take the primary's log over this one's, but the node hears of
		// the fence through the error all the same.
		msg += fmt.Sprintf(" (the fence could not be recorded: %v)", err)
	}
	serr := errorf(ErrStorage, "%s", msg)
	r.failPending(serr)
	r.failWaiters(serr)
	r.raft, r.held = nil, nil
	r.failure = fmt.Errorf("%w: %s", ErrFenced, msg)
	if r.cfg.onFenced != nil {
		r.cfg.onFenced(r)
	}
	return r.failure
}

// losesAcked reports whether the log acknowledges entries before they
// are durable (every fsync policy but always).
func losesAcked(c segment.Config) bool { return c.Fsync != segment.FsyncAlways }
