package node

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/corestream/corestream/cluster/clock"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"
	"golang.org/x/sys/unix"
)

// A partition this node should host but cannot open (past the open-file
// limit, on a read-only or full disk, without permission) is retried
// after a bounded exponential back-off, not on every reconcile pass: with
// 433 partitions past `ulimit -n` the node retried each every ~5 ms and
// logged 2,700 ERROR lines a second at 87 % CPU. Each partition's failure
// is logged once per kind of failure, at most openErrorLogsMax lines per
// openErrorLogWindow in all, with a summary of the rest; requests for the
// partition get STORAGE_ERROR naming the cause, and a CreateTopic whose
// partitions cannot open here fails naming it.
const (
	// openBackoffMin is the wait before the first retry of a failed open;
	// each further failure doubles it, up to openBackoffMax.
	openBackoffMin = 100 * time.Millisecond
	openBackoffMax = 30 * time.Second
	// openErrorLogsMax bounds the ERROR lines about failed opens per
	// openErrorLogWindow, node-wide; the rest are counted into one summary.
	openErrorLogsMax   = 10
	openErrorLogWindow = 10 * time.Second
)

// openFailure is why one partition could not be opened, and when it is
// tried again.
type openFailure struct {
	topic     string
	partition int32
	shard     int
	err       error
	kind      string
	// attempts counts failed opens in a row (any kind).
	attempts int
	since    time.Time
	// backoff is the current wait; retryAt = last failure + backoff.
	backoff time.Duration
	retryAt time.Time
	// logged holds the kinds already logged at ERROR for this partition.
	logged map[string]bool
}

// describe is the cause, for clients and operators.
func (f *openFailure) describe() string {
	return fmt.Sprintf("%s (%v)", f.kind, f.err)
}

// openFailures is the node's record of partitions that failed to open.
// Shards write it from reconcile; any shard reads it to answer requests.
//
// mu guards every field.
type openFailures struct {
	mu sync.Mutex
	m  map[[20]byte]*openFailure
	// window is the log limit's window (0: openErrorLogWindow; tests
	// shorten it). windowStart, logged and suppressed implement the
	// limit; kinds counts the suppressed lines by kind.
	window      time.Duration
	windowStart time.Time
	logged      int
	suppressed  int
	kinds       map[string]int
}

// openErrorKind classifies an open error into what an operator acts on.
func openErrorKind(err error) string {
	switch {
	case errors.Is(err, unix.EMFILE), errors.Is(err, unix.ENFILE):
		var lim unix.Rlimit
		if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) == nil {
			return fmt.Sprintf("too many open files (ulimit -n %d): raise the limit on open files", lim.Cur)
		}
		return "too many open files: raise the limit on open files (ulimit -n)"
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		return "no space left on the data directory's device"
	case errors.Is(err, unix.EROFS):
		return "the data directory is on a read-only file system"
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return "permission denied in the data directory"
	case errors.Is(err, unix.EIO):
		return "I/O error on the data directory's device"
	case errors.Is(err, partition.ErrFenced):
		return "fenced: its group lost committed entries; remove the replica's directory"
	}
	return "open failed"
}

// due reports whether the partition with key may be opened now.
func (o *openFailures) due(key [20]byte, now time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	f := o.m[key]
	return f == nil || !now.Before(f.retryAt)
}

// failed records a failed open and returns a copy of the record, and
// whether to log it at ERROR (first failure of its kind for the
// partition, within the log limit).
func (o *openFailures) failed(key [20]byte, topic string, p int32, shardID int, err error, now time.Time) (openFailure, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[[20]byte]*openFailure{}
	}
	f := o.m[key]
	if f == nil {
		f = &openFailure{topic: topic, partition: p, shard: shardID, since: now, logged: map[string]bool{}}
		o.m[key] = f
	}
	f.err, f.kind = err, openErrorKind(err)
	f.attempts++
	f.backoff = min(max(2*f.backoff, openBackoffMin), openBackoffMax)
	f.retryAt = now.Add(f.backoff)
	logIt := !f.logged[f.kind]
	f.logged[f.kind] = true
	if logIt {
		if now.Sub(o.windowStart) >= o.windowLen() {
			o.windowStart, o.logged = now, 0
		}
		if o.logged < openErrorLogsMax {
			o.logged++
		} else {
			logIt = false
			o.suppressed++
			if o.kinds == nil {
				o.kinds = map[string]int{}
			}
			o.kinds[f.kind]++
		}
	}
	return *f, logIt
}

func (o *openFailures) windowLen() time.Duration {
	if o.window > 0 {
		return o.window
	}
	return openErrorLogWindow
}

// takeSuppressed returns (and resets) the count of failures not logged,
// by kind, once the log window they fell in has passed.
func (o *openFailures) takeSuppressed(now time.Time) (int, map[string]int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.suppressed == 0 || now.Sub(o.windowStart) < o.windowLen() {
		return 0, nil
	}
	n, kinds := o.suppressed, o.kinds
	o.suppressed, o.kinds = 0, nil
	o.windowStart, o.logged = now, 0
	return n, kinds
}

// succeeded forgets key's failures and returns how many there were.
func (o *openFailures) succeeded(key [20]byte) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	f := o.m[key]
	if f == nil {
		return 0
	}
	delete(o.m, key)
	return f.attempts
}

// get returns a copy of key's failure record.
func (o *openFailures) get(key [20]byte) (openFailure, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	f := o.m[key]
	if f == nil {
		return openFailure{}, false
	}
	return *f, true
}

// prune forgets shard shardID's failures of partitions it no longer
// hosts (a deleted topic) and returns the earliest retry of the rest
// (zero when none).
func (o *openFailures) prune(shardID int, want map[[20]byte]bool) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	var next time.Time
	for key, f := range o.m {
		if f.shard != shardID {
			continue
		}
		if !want[key] {
			delete(o.m, key)
			continue
		}
		if next.IsZero() || f.retryAt.Before(next) {
			next = f.retryAt
		}
	}
	return next
}

// count is the number of partitions offline because they failed to open.
func (o *openFailures) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.m)
}

// OpenFailure describes one partition this node could not open.
type OpenFailure struct {
	Topic     string
	Partition int32
	// Cause says what failed and what to do, with the error.
	Cause    string
	Attempts int
	Since    time.Time
	RetryAt  time.Time
}

// OpenFailures lists the partitions this node should host but could not
// open, sorted by topic and partition (for status pages and tests).
func (n *Node) OpenFailures() []OpenFailure {
	n.openErrs.mu.Lock()
	out := make([]OpenFailure, 0, len(n.openErrs.m))
	for _, f := range n.openErrs.m {
		out = append(out, OpenFailure{Topic: f.topic, Partition: f.partition, Cause: f.describe(),
			Attempts: f.attempts, Since: f.since, RetryAt: f.retryAt})
	}
	n.openErrs.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// openFailed records a failed open on shard sh and logs it within the
// limits.
func (rc *reconciler) openFailed(sh *shard.Shard, key [20]byte, topic string, p int32, err error, now time.Time) {
	f, logIt := rc.errs.failed(key, topic, p, sh.ID(), err, now)
	if logIt {
		rc.d.log.Error("opening a partition", "topic", topic, "partition", p, "cause", f.kind, "err", err,
			"retry_in", f.backoff, "offline_partitions", rc.errs.count())
	} else {
		rc.d.log.Debug("opening a partition", "topic", topic, "partition", p, "attempt", f.attempts, "err", err, "retry_in", f.backoff)
	}
}

// logSuppressedOpenErrors logs the summary of failures the limit kept
// from the log.
func (rc *reconciler) logSuppressedOpenErrors(now time.Time) {
	if count, kinds := rc.errs.takeSuppressed(now); count > 0 {
		rc.d.log.Error("more partitions could not be opened (not logged one by one)", "partitions", count,
			"causes", fmt.Sprint(kinds), "offline_partitions", rc.errs.count())
	}
}

// openErr is the answer to a request for a partition that failed to open
// here: STORAGE_ERROR with the cause (retriable: it is retried here).
func (n *Node) openErr(topic string, p int32, f openFailure) error {
	e := service.Errorf(partition.ErrStorage, "%s/%d could not be opened on node %d: %s; %d attempts, next in %v",
		topic, p, n.self, f.describe(), f.attempts, clock.Until(n.clock, f.retryAt).Round(time.Millisecond))
	// Another replica may be primary (a refresh finds it): wait at most
	// a second, not the whole back-off.
	e.RetryAfterMs = uint32(min(max(clock.Until(n.clock, f.retryAt), 0), time.Second) / time.Millisecond)
	return e
}
