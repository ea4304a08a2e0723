package controller

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/routes"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment/batch"
)

// The controller's pure core (Core): the metadata log's committed
// batches in, the applied state, the proposers' results, the View and
// the readiness rule out; and the formats of a command in the log
// (EncodeCommand) and of a snapshot's payload (EncodeSnapshot). The
// node's controller runs it on the metadata group's shard; the
// control-plane simulator runs the same code. The readiness rule is
// docs/design/node-parts.md's and cluster/node's ready.go's: a node's
// metadata is loaded once an entry of the current term is applied, or
// the current primary's snapshot of that term is installed, while it
// follows that term's primary.

// resultsMax bounds the apply results kept for proposers.
const resultsMax = 4096

// applied is the outcome of one metadata command, kept for its proposer.
type applied struct {
	res metadata.Result
	err error
}

// Core is the controller's pure core: committed metadata log
// entries in (RecordBatch bytes, one command per record), the applied
// state, the proposers' results and the readiness rule out. It reads no
// log, clock, shard or file, so the simulator applies the metadata
// through the very same code.
type Core struct {
	state   *metadata.State
	applied int64
	// appliedTerm is the term of the entry at applied (0: none applied
	// since the start); resetAt and resetTerm are the end of a snapshot
	// the primary sent and its term (0: none). They decide when the
	// metadata is loaded (ready.go).
	appliedTerm int32
	resetAt     int64
	resetTerm   int32
	// results holds apply outcomes by log offset for proposers;
	// resultOrder evicts the oldest past resultsMax.
	results     map[int64]applied
	resultOrder []int64
	iter        batch.Records
	log         *slog.Logger
	// Changed, when set, is told of each command applied (the node logs
	// metadata changes with it; the simulator leaves it nil).
	Changed func(cmd metadata.Command, res metadata.Result, offset int64, generation int32)
}

// NewCore is an empty core: nothing applied (-1).
func NewCore(log *slog.Logger) *Core {
	return &Core{state: metadata.New(), applied: -1, results: map[int64]applied{}, log: log}
}

// applyData applies data, whole batches read from the metadata log in
// order, the last ending at offset last; entries at or below applied are
// skipped. It reports whether the state changed. A batch it cannot
// decode stops it with an error, applied left at the last good batch.
func (m *Core) ApplyData(data []byte, last int64) (changed bool, err error) {
	for len(data) > 0 {
		h, err := batch.ReadHeader(data)
		if err != nil || h.Size() > len(data) {
			if err == nil {
				err = fmt.Errorf("a batch of %d bytes where %d remain", h.Size(), len(data))
			}
			return changed, fmt.Errorf("node: bad batch in the metadata log at offset %d: %w", m.applied+1, err)
		}
		b := data[:h.Size()]
		data = data[h.Size():]
		m.appliedTerm = h.PartitionLeaderEpoch
		if h.IsControl() || h.LastOffset() <= m.applied {
			continue
		}
		changed = m.applyBatch(b) || changed
	}
	m.applied = max(m.applied, last)
	return changed, nil
}

// applyBatch applies the commands of one batch (one record each).
func (m *Core) applyBatch(b []byte) bool {
	if err := m.iter.Reset(b); err != nil {
		m.log.Error("metadata: corrupt batch", "err", err)
		return false
	}
	changed := false
	for m.iter.Next() {
		rec := m.iter.Record()
		cmd, err := metadata.DecodeCommand(rec.Value)
		var res metadata.Result
		if err == nil {
			res, err = m.state.Apply(cmd)
			changed = changed || err == nil
			if err == nil && m.Changed != nil {
				m.Changed(cmd, res, rec.Offset, m.appliedTerm)
			}
		}
		if err != nil && !errors.Is(err, metadata.ErrTopicExists) && !errors.Is(err, metadata.ErrUnknownTopic) {
			m.log.Warn("metadata: command refused", "offset", rec.Offset, "op", cmd.Op, "err", err)
		}
		m.keep(rec.Offset, applied{res, err})
	}
	return changed
}

func (m *Core) keep(off int64, a applied) {
	m.results[off] = a
	m.resultOrder = append(m.resultOrder, off)
	for len(m.resultOrder) > resultsMax {
		delete(m.results, m.resultOrder[0])
		m.resultOrder = m.resultOrder[1:]
	}
}

// Answer gives the proposer of the command at off, applied, its result.
func (m *Core) Answer(off int64, done func(metadata.Result, error)) {
	a, ok := m.results[off]
	if !ok {
		done(metadata.Result{}, service.Errorf(service.ErrInternal, "metadata command at offset %d committed but its result is gone", off))
		return
	}
	delete(m.results, off)
	done(a.res, a.err)
}

// View is the applied state as a View.
func (m *Core) View() *routes.View { return routes.NewView(m.state, m.applied) }

// EncodeCommand is cmd as the metadata log holds it: a batch of one
// record stamped atMs.
func EncodeCommand(cmd metadata.Command, atMs int64) ([]byte, error) {
	b, err := batch.NewBuilder(batch.Options{})
	if err == nil {
		err = b.AppendKV(atMs, nil, cmd.Encode())
	}
	if err != nil {
		return nil, err
	}
	return b.Build()
}

// ObserveReset notes the snapshot point of a MsgReset that the current
// primary (leader, in term) sent in its own term, ending at an entry of
// that term. Pure: the simulator feeds it the same messages.
func (m *Core) ObserveReset(msg *raftlite.Message, leader raftlite.NodeID, term int32) {
	if msg.Type == raftlite.MsgReset && msg.From == leader && msg.Term == term && msg.LogTerm == msg.Term {
		m.resetAt, m.resetTerm = msg.Index, msg.Term
	}
}

// LoadedIn is the readiness rule for a node whose metadata group
// is in term, following a primary in it (led): an entry of term is
// applied, or a snapshot the primary of term sent is installed. Pure: the
// simulator checks the same rule.
func (m *Core) LoadedIn(term int32, led bool) bool {
	if term == 0 || !led {
		return false
	}
	return m.appliedTerm == term || (m.resetTerm == term && m.applied >= m.resetAt)
}

// Restored notes, for a node started from its snapshot, the term of the
// entry the snapshot ends at, as the log records it (termAt: the log's
// term of an offset, start-1 included); it stays unknown when the log no
// longer holds that offset.
func (m *Core) Restored(termAt func(off int64) (int32, error)) {
	if m.applied < 0 {
		return
	}
	if t, err := termAt(m.applied); err == nil {
		m.appliedTerm = t
	}
}

// EncodeSnapshot is a metadata snapshot's payload: the offset it
// covers, then the state (metadata.State.Snapshot).
func EncodeSnapshot(applied int64, state []byte) []byte {
	out := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(state)), uint64(applied))
	return append(out, state...)
}

// DecodeSnapshot reads a payload EncodeSnapshot wrote.
func DecodeSnapshot(b []byte) (int64, *metadata.State, error) {
	if len(b) < 8 {
		return 0, nil, fmt.Errorf("node: metadata snapshot of %d bytes", len(b))
	}
	s, err := metadata.Restore(b[8:])
	if err != nil {
		return 0, nil, fmt.Errorf("node: metadata snapshot: %w", err)
	}
	return int64(binary.BigEndian.Uint64(b)), s, nil
}

// Install replaces the applied state with snapshot snap (EncodeSnapshot)
// when it covers more than is applied, and reports whether it did.
func (m *Core) Install(snap []byte) (bool, error) {
	applied, st, err := DecodeSnapshot(snap)
	if err != nil {
		return false, err
	}
	if applied <= m.applied {
		return false, nil
	}
	m.state, m.applied = st, applied
	return true, nil
}

// State is the applied state; Install replaces it, so read it at each
// use.
func (m *Core) State() *metadata.State { return m.state }

// Applied is the last metadata log offset applied (-1: none).
func (m *Core) Applied() int64 { return m.applied }

// AppliedTerm is the term of the entry at Applied (0: none applied since
// the start and none restored).
func (m *Core) AppliedTerm() int32 { return m.appliedTerm }

// Load replaces the applied state with a snapshot's, read at start
// (Install is for one a leader sent: it replaces only a state behind it).
func (m *Core) Load(applied int64, st *metadata.State) { m.state, m.applied = st, applied }
