// Package txns is the transaction coordinator's state machine: Kafka's
// transactional ids, their producer ids and epochs, the partitions each
// open transaction wrote to, and the two-phase end (prepare, markers,
// complete), as a pure state machine. It does no I/O and reads no clock:
// its owner passes the time of each call, persists each Transition it is
// handed (in the coordinator's partition of the transaction-state topic)
// before it calls Apply and answers, writes the markers a prepared
// transaction needs and then completes it, and replays the persisted
// records into a new coordinator after a failover
// (docs/design/transactions.md).
//
// One transition per transactional id is in flight at a time: a call
// that finds one pending answers ErrConcurrentTransactions, which clients
// retry, as Kafka's coordinator does.
package txns

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// Sentinel errors, one per Kafka error code a client acts on.
var (
	// ErrConcurrentTransactions: another change of the id is under way
	// (a prepared transaction's markers, an earlier call's write); the
	// client retries (CONCURRENT_TRANSACTIONS).
	ErrConcurrentTransactions = errors.New("txns: a change of this transactional id is under way")
	// ErrProducerFenced: the producer's epoch is older than the id's:
	// a newer producer of the same transactional id took over
	// (PRODUCER_FENCED).
	ErrProducerFenced = errors.New("txns: producer fenced by a newer epoch")
	// ErrInvalidProducerIDMapping: the producer id is not the one of the
	// transactional id, or the id is unknown (INVALID_PRODUCER_ID_MAPPING).
	ErrInvalidProducerIDMapping = errors.New("txns: producer id does not belong to the transactional id")
	// ErrInvalidTxnState: the call does not fit the transaction's state
	// (ending a transaction that never began, committing one being
	// aborted) (INVALID_TXN_STATE).
	ErrInvalidTxnState = errors.New("txns: invalid transaction state")
	// ErrInvalidTimeout: the transaction timeout is not in
	// 1..Config.TimeoutMaxMs (INVALID_TRANSACTION_TIMEOUT).
	ErrInvalidTimeout = errors.New("txns: invalid transaction timeout")
	// ErrTooMany: the coordinator holds Config.IDsMax ids, or the
	// transaction Config.PartitionsMax partitions.
	ErrTooMany = errors.New("txns: too many transactional ids or partitions")
	// ErrUnknownID: no such transactional id (DescribeTransactions).
	ErrUnknownID = errors.New("txns: unknown transactional id")
	// ErrNotCoordinator: the coordinator was reset while the call was
	// pending (its node lost the id's partition); the client finds the
	// new coordinator and retries there.
	ErrNotCoordinator = errors.New("txns: no longer the transactional id's coordinator")
)

// State is a transactional id's state, named as Kafka's
// DescribeTransactions names it.
type State int8

const (
	Empty State = iota
	Ongoing
	PrepareCommit
	PrepareAbort
	CompleteCommit
	CompleteAbort
	Dead
)

// String is the state as Kafka clients and tools show it.
func (s State) String() string {
	switch s {
	case Empty:
		return "Empty"
	case Ongoing:
		return "Ongoing"
	case PrepareCommit:
		return "PrepareCommit"
	case PrepareAbort:
		return "PrepareAbort"
	case CompleteCommit:
		return "CompleteCommit"
	case CompleteAbort:
		return "CompleteAbort"
	case Dead:
		return "Dead"
	}
	return fmt.Sprintf("State(%d)", int8(s))
}

// Prepared says the state waits for its markers.
func (s State) Prepared() bool { return s == PrepareCommit || s == PrepareAbort }

// ending says the state is an end, prepared or complete, of the kind
// commit asks for.
func (s State) ending(commit bool) bool {
	if commit {
		return s == PrepareCommit || s == CompleteCommit
	}
	return s == PrepareAbort || s == CompleteAbort
}

// Partition is a partition a transaction wrote to (or a group whose
// offsets it commits: its __groups partition).
type Partition struct {
	Topic     string
	Partition int32
}

func (p Partition) less(q Partition) bool {
	return p.Topic < q.Topic || p.Topic == q.Topic && p.Partition < q.Partition
}

// Txn is one transactional id's state, the value a record persists.
// Invariant: Partitions is sorted and without duplicates, empty unless
// the state is Ongoing or prepared.
type Txn struct {
	ID         string
	ProducerID int64
	Epoch      int16
	// PrevEpoch is the epoch before the last bump by an end of
	// transaction version 2 (-1: none): a retried EndTxn of that epoch
	// is answered as the one it retries.
	PrevEpoch int16
	TimeoutMs int32
	State     State
	// Partitions the open (or prepared) transaction wrote to.
	Partitions []Partition
	// StartMs is when the open transaction began (its first
	// AddPartitions), UpdateMs the last change.
	StartMs, UpdateMs int64
	// Version2 says the transaction ends with an epoch bump (EndTxn v5+,
	// KIP-890): the markers carry the new epoch.
	Version2 bool
}

// clone is a deep copy of t.
func (t *Txn) clone() *Txn {
	c := *t
	c.Partitions = slices.Clone(t.Partitions)
	return &c
}

// Config bounds the coordinator.
type Config struct {
	// TimeoutMaxMs bounds a transaction's timeout (Kafka's
	// transaction.max.timeout.ms, 15 minutes).
	TimeoutMaxMs int32
	// IDsMax bounds the transactional ids one coordinator holds.
	IDsMax int
	// PartitionsMax bounds the partitions of one transaction.
	PartitionsMax int
	// NewProducerID draws a producer id no other producer has.
	NewProducerID func() (int64, error)
}

// Defaults of Config.
const (
	TimeoutMaxMsDefault  = 15 * 60 * 1000
	IDsMaxDefault        = 100_000
	PartitionsMaxDefault = 10_000
)

// Transition is a change of one id that its owner persists, then
// Applies. Answer is what the call that asked for it answers once it is
// applied (nil: success; ErrConcurrentTransactions for an
// InitProducerID that had to abort an open transaction first). After a
// transition to a prepared state the owner writes Markers().
type Transition struct {
	Next   *Txn
	Answer error
	// Delete removes the id (its record is a tombstone).
	Delete bool
}

// Marker is one marker a prepared transaction needs.
type Marker struct {
	Partition  Partition
	ProducerID int64
	Epoch      int16
	Commit     bool
}

// Markers are the markers the transition's prepared state needs, one per
// partition of the transaction (none for another state).
func (tr *Transition) Markers() []Marker {
	t := tr.Next
	if t == nil || !t.State.Prepared() {
		return nil
	}
	out := make([]Marker, len(t.Partitions))
	for i, p := range t.Partitions {
		out[i] = Marker{Partition: p, ProducerID: t.ProducerID, Epoch: t.Epoch, Commit: t.State == PrepareCommit}
	}
	return out
}

// Coordinator is the state of the transactional ids of one
// transaction-state partition.
type Coordinator struct {
	cfg     Config
	ids     map[string]*Txn
	pending map[string]bool
}

// New returns an empty coordinator.
func New(cfg Config) *Coordinator {
	if cfg.TimeoutMaxMs <= 0 {
		cfg.TimeoutMaxMs = TimeoutMaxMsDefault
	}
	if cfg.IDsMax <= 0 {
		cfg.IDsMax = IDsMaxDefault
	}
	if cfg.PartitionsMax <= 0 {
		cfg.PartitionsMax = PartitionsMaxDefault
	}
	return &Coordinator{cfg: cfg, ids: map[string]*Txn{}, pending: map[string]bool{}}
}

// Get is a copy of id's state (nil: unknown).
func (c *Coordinator) Get(id string) *Txn {
	if t := c.ids[id]; t != nil {
		return t.clone()
	}
	return nil
}

// IDs lists the known transactional ids, sorted.
func (c *Coordinator) IDs() []string {
	out := make([]string, 0, len(c.ids))
	for id := range c.ids {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// begin marks id pending and returns tr; only one transition per id is
// in flight.
func (c *Coordinator) begin(id string, tr *Transition) (*Transition, error) {
	if c.pending[id] {
		return nil, ErrConcurrentTransactions
	}
	c.pending[id] = true
	return tr, nil
}

// InitProducerID is Kafka's InitProducerId for a transactional id: a new
// id gets a fresh producer id at epoch 0; a known one's epoch is bumped
// (fencing the producer that held it; past the largest epoch a fresh
// producer id at epoch 0), after an open transaction is aborted first:
// that transition answers ErrConcurrentTransactions, and the client's
// retry, once the abort completes, gets the new epoch. expectID and
// expectEpoch (-1: none) are KIP-360's: a producer re-initialising
// names what it holds, and is fenced unless it holds the current epoch.
func (c *Coordinator) InitProducerID(id string, timeoutMs int32, expectID int64, expectEpoch int16, nowMs int64) (*Transition, error) {
	if timeoutMs <= 0 || timeoutMs > c.cfg.TimeoutMaxMs {
		return nil, fmt.Errorf("%w: %d ms; give 1..%d", ErrInvalidTimeout, timeoutMs, c.cfg.TimeoutMaxMs)
	}
	if c.pending[id] {
		return nil, ErrConcurrentTransactions
	}
	t := c.ids[id]
	if t == nil || t.State == Dead {
		if t == nil && len(c.ids) >= c.cfg.IDsMax {
			return nil, fmt.Errorf("%w: %d transactional ids on this coordinator", ErrTooMany, len(c.ids))
		}
		pid, err := c.cfg.NewProducerID()
		if err != nil {
			return nil, err
		}
		return c.begin(id, &Transition{Next: &Txn{ID: id, ProducerID: pid, PrevEpoch: -1, TimeoutMs: timeoutMs, State: Empty, UpdateMs: nowMs}})
	}
	if expectID >= 0 && (expectID != t.ProducerID || expectEpoch != t.Epoch) {
		return nil, fmt.Errorf("%w: the producer holds id %d epoch %d, the transactional id is at %d epoch %d",
			ErrProducerFenced, expectID, expectEpoch, t.ProducerID, t.Epoch)
	}
	switch t.State {
	case PrepareCommit, PrepareAbort:
		return nil, ErrConcurrentTransactions
	case Ongoing:
		// Fence the old producer and abort what it left open; the
		// client retries InitProducerId once the abort is complete.
		next := t.clone()
		if err := c.bump(next); err != nil {
			return nil, err
		}
		next.State, next.UpdateMs = PrepareAbort, nowMs
		return c.begin(id, &Transition{Next: next, Answer: ErrConcurrentTransactions})
	}
	next := t.clone()
	if err := c.bump(next); err != nil {
		return nil, err
	}
	next.State, next.Partitions, next.TimeoutMs, next.UpdateMs, next.StartMs, next.PrevEpoch = Empty, nil, timeoutMs, nowMs, 0, -1
	return c.begin(id, &Transition{Next: next})
}

// bump raises t's epoch, or past the largest gives it a fresh producer
// id at epoch 0.
func (c *Coordinator) bump(t *Txn) error {
	if t.Epoch < math.MaxInt16-1 {
		t.Epoch++
		return nil
	}
	pid, err := c.cfg.NewProducerID()
	if err != nil {
		return err
	}
	t.ProducerID, t.Epoch = pid, 0
	return nil
}

// check is the producer check every transactional call makes.
func (c *Coordinator) check(id string, pid int64, epoch int16) (*Txn, error) {
	t := c.ids[id]
	if t == nil || t.State == Dead || t.ProducerID != pid {
		return nil, fmt.Errorf("%w: transactional id %q, producer %d", ErrInvalidProducerIDMapping, id, pid)
	}
	if epoch != t.Epoch {
		return nil, fmt.Errorf("%w: epoch %d, the transactional id is at %d", ErrProducerFenced, epoch, t.Epoch)
	}
	if c.pending[id] {
		return nil, ErrConcurrentTransactions
	}
	return t, nil
}

// AddPartitions is AddPartitionsToTxn (and AddOffsetsToTxn, with the
// group's partition): the transaction is open from then on, with parts
// among its partitions. Nil and no error: nothing to change (every part
// is in already).
func (c *Coordinator) AddPartitions(id string, pid int64, epoch int16, parts []Partition, nowMs int64) (*Transition, error) {
	t, err := c.check(id, pid, epoch)
	if err != nil {
		return nil, err
	}
	switch t.State {
	case PrepareCommit, PrepareAbort:
		return nil, ErrConcurrentTransactions
	case Dead:
		return nil, ErrInvalidTxnState
	}
	next := t.clone()
	if t.State != Ongoing {
		next.Partitions, next.StartMs = nil, nowMs
	}
	added := false
	for _, p := range parts {
		i, found := slices.BinarySearchFunc(next.Partitions, p, func(a, b Partition) int {
			switch {
			case a.less(b):
				return -1
			case b.less(a):
				return 1
			}
			return 0
		})
		if !found {
			next.Partitions = slices.Insert(next.Partitions, i, p)
			added = true
		}
	}
	if !added && t.State == Ongoing {
		return nil, nil
	}
	if len(next.Partitions) > c.cfg.PartitionsMax {
		return nil, fmt.Errorf("%w: a transaction of %d partitions, at most %d", ErrTooMany, len(next.Partitions), c.cfg.PartitionsMax)
	}
	next.State, next.UpdateMs = Ongoing, nowMs
	return c.begin(id, &Transition{Next: next})
}

// EndTxn commits or aborts the open transaction: it is prepared (answered
// once that is persisted), its markers are written, then it completes.
// A retry of an end that completed is answered as it was; ending a
// transaction the other way than it is ending, or one that never began,
// is ErrInvalidTxnState. version2 bumps the epoch at the prepare (KIP-890:
// the markers fence the producer's old epoch), so the answer carries the
// new epoch; a retry with the epoch before the bump is recognised.
// Nil and no error: answered without a change (a retry).
func (c *Coordinator) EndTxn(id string, pid int64, epoch int16, commit, version2 bool, nowMs int64) (*Transition, *Txn, error) {
	t := c.ids[id]
	if t != nil && version2 && t.ProducerID == pid && epoch == t.PrevEpoch && epoch != t.Epoch && !c.pending[id] {
		// A retry of the end that bumped epoch to t.Epoch.
		if t.State.ending(commit) {
			return nil, t.clone(), nil
		}
		return nil, nil, fmt.Errorf("%w: %s, asked to %s", ErrInvalidTxnState, t.State, endVerb(commit))
	}
	t, err := c.check(id, pid, epoch)
	if err != nil {
		return nil, nil, err
	}
	switch t.State {
	case Ongoing:
		next := t.clone()
		next.State, next.UpdateMs, next.Version2 = PrepareAbort, nowMs, version2
		if commit {
			next.State = PrepareCommit
		}
		if version2 {
			next.PrevEpoch = next.Epoch
			if err := c.bump(next); err != nil {
				return nil, nil, err
			}
		}
		tr, err := c.begin(id, &Transition{Next: next})
		return tr, nil, err
	case CompleteCommit, CompleteAbort:
		if t.State.ending(commit) && !version2 {
			return nil, t.clone(), nil // a retry of the end that completed
		}
	case PrepareCommit, PrepareAbort:
		if t.State.ending(commit) {
			return nil, nil, ErrConcurrentTransactions
		}
	}
	return nil, nil, fmt.Errorf("%w: %s, asked to %s", ErrInvalidTxnState, t.State, endVerb(commit))
}

func endVerb(commit bool) string {
	if commit {
		return "commit"
	}
	return "abort"
}

// Complete is the transition of a prepared transaction whose markers are
// all written: CompleteCommit or CompleteAbort, its partitions cleared.
func (c *Coordinator) Complete(id string, nowMs int64) (*Transition, error) {
	t := c.ids[id]
	if t == nil || !t.State.Prepared() {
		return nil, fmt.Errorf("%w: complete %q in state %v", ErrInvalidTxnState, id, stateOf(t))
	}
	next := t.clone()
	next.State, next.Partitions, next.UpdateMs = CompleteAbort, nil, nowMs
	if t.State == PrepareCommit {
		next.State = CompleteCommit
	}
	return c.begin(id, &Transition{Next: next})
}

func stateOf(t *Txn) string {
	if t == nil {
		return "unknown"
	}
	return t.State.String()
}

// Expired lists the ids whose open transaction has run past its timeout
// at nowMs, and which have no change pending: the owner aborts each
// (Abort).
func (c *Coordinator) Expired(nowMs int64) []string {
	var out []string
	for id, t := range c.ids {
		if t.State == Ongoing && !c.pending[id] && nowMs-t.StartMs > int64(t.TimeoutMs) {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

// Abort is the abort of id's open transaction by the coordinator (its
// timeout passed): prepared with a bumped epoch, so that the producer
// that left it is fenced.
func (c *Coordinator) Abort(id string, nowMs int64) (*Transition, error) {
	if c.pending[id] {
		return nil, ErrConcurrentTransactions
	}
	t := c.ids[id]
	if t == nil || t.State != Ongoing {
		return nil, fmt.Errorf("%w: abort %q in state %v", ErrInvalidTxnState, id, stateOf(t))
	}
	next := t.clone()
	if err := c.bump(next); err != nil {
		return nil, err
	}
	next.State, next.UpdateMs = PrepareAbort, nowMs
	return c.begin(id, &Transition{Next: next})
}

// Apply makes tr's change the state, once its record is persisted, and
// ends its pending mark. A transition of a coordinator that was reset
// since it was begun is ignored (the replayed log holds it, or not).
func (c *Coordinator) Apply(tr *Transition) {
	id := tr.Next.ID
	if !c.pending[id] {
		return
	}
	delete(c.pending, id)
	c.put(tr.Next, tr.Delete)
}

// Fail ends tr's pending mark without a change: its record was not
// persisted (the coordinator lost its partition, or the write failed).
func (c *Coordinator) Fail(tr *Transition) { delete(c.pending, tr.Next.ID) }

func (c *Coordinator) put(t *Txn, del bool) {
	if del {
		delete(c.ids, t.ID)
		return
	}
	c.ids[t.ID] = t.clone()
}

// Reset forgets every id and pending change (the node lost the
// partition); Replay then rebuilds a coordinator from the records.
func (c *Coordinator) Reset() {
	clear(c.ids)
	clear(c.pending)
}

// Prepared lists the ids whose transactions are prepared: after a
// replay, the new coordinator writes their markers and completes them.
func (c *Coordinator) Prepared() []*Txn {
	var out []*Txn
	for _, t := range c.ids {
		if t.State.Prepared() {
			out = append(out, t.clone())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// String is a summary, for logs.
func (c *Coordinator) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d transactional ids", len(c.ids))
	if n := len(c.pending); n > 0 {
		fmt.Fprintf(&sb, ", %d changes pending", n)
	}
	return sb.String()
}
