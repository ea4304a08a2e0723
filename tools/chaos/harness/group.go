package harness

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A consumer group under the faults (Kafka runs): members on clients of
// different nodes read every topic of the run, each poll committed
// before the group may rebalance (franz-go's BlockRebalanceOnPoll), and
// every assignment, poll and commit is recorded with its time so that
// CheckGroup can look for Jepsen's anomaly classes in the history.

// Bounds of the group.
const (
	groupName       = "chaos-group"
	groupPollMax    = 1000
	groupErrorsMax  = 8
	groupEventsHint = 1 << 14
)

// GroupEventKind says what a GroupEvent records.
type GroupEventKind uint8

// The kinds of group events.
const (
	// Assigned, Revoked and Lost: the member got or gave up Partition.
	Assigned GroupEventKind = iota + 1
	Revoked
	Lost
	// Polled: the member polled the record at Offset, Seq its sequence
	// number (-1: its key was not the workload's).
	Polled
	// Committed: the member's commit of Offset (the next to read) was
	// answered without error; StartNs..EndNs is the call.
	Committed
)

// GroupEvent is one step of a member's history.
type GroupEvent struct {
	Member         int
	Kind           GroupEventKind
	Partition      string // "topic/p"
	Offset, Seq    int64
	StartNs, EndNs int64
}

// member is one member of the group. mu guards the fields below it.
type member struct {
	id    int
	cl    *kgo.Client
	clock func() int64
	mu    sync.Mutex
	// events is the member's history in the order it happened.
	events     []GroupEvent
	errCount   int
	errs       []string
	commitErrs int
}

func newMember(id int, c kafkaConf, topics []string, clock func() int64) (*member, error) {
	m := &member{id: id, clock: clock, events: make([]GroupEvent, 0, groupEventsHint)}
	note := func(kind GroupEventKind) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
			now := m.clock()
			m.mu.Lock()
			defer m.mu.Unlock()
			for t, ps := range parts {
				for _, p := range ps {
					m.events = append(m.events, GroupEvent{Member: id, Kind: kind, Partition: fmt.Sprintf("%s/%d", t, p), StartNs: now, EndNs: now})
				}
			}
		}
	}
	cl, err := kgo.NewClient(append(c.opts(id),
		kgo.ConsumerGroup(groupName),
		kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(note(Assigned)),
		kgo.OnPartitionsRevoked(note(Revoked)),
		kgo.OnPartitionsLost(note(Lost)))...)
	if err != nil {
		return nil, fmt.Errorf("chaos: group member %d: %w", id, err)
	}
	m.cl = cl
	return m, nil
}

// run polls, records and commits until ctx ends, then leaves the group.
func (m *member) run(ctx context.Context) {
	defer m.cl.Close()
	for ctx.Err() == nil {
		fs := m.cl.PollRecords(ctx, groupPollMax)
		now := m.clock()
		next := map[string]map[int32]kgo.EpochOffset{}
		m.mu.Lock()
		if err := fetchError(fs); err != nil {
			m.errCount++
			if len(m.errs) < groupErrorsMax {
				m.errs = append(m.errs, errText(err))
			}
		}
		fs.EachRecord(func(r *kgo.Record) {
			seq := int64(-1)
			if len(r.Key) == 8 {
				seq = int64(binary.BigEndian.Uint64(r.Key))
			}
			m.events = append(m.events, GroupEvent{Member: m.id, Kind: Polled, Partition: fmt.Sprintf("%s/%d", r.Topic, r.Partition),
				Offset: r.Offset, Seq: seq, StartNs: now, EndNs: now})
			if next[r.Topic] == nil {
				next[r.Topic] = map[int32]kgo.EpochOffset{}
			}
			next[r.Topic][r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
		})
		m.mu.Unlock()
		if len(next) > 0 && ctx.Err() == nil {
			m.commit(ctx, next)
		}
		m.cl.AllowRebalance()
	}
}

// commit commits next synchronously and records each partition the
// broker answered without error.
func (m *member) commit(ctx context.Context, next map[string]map[int32]kgo.EpochOffset) {
	start := m.clock()
	m.cl.CommitOffsetsSync(ctx, next, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		end := m.clock()
		m.mu.Lock()
		defer m.mu.Unlock()
		if err != nil || resp == nil {
			m.commitErrs++
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 {
					m.commitErrs++
					continue
				}
				eo, ok := next[t.Topic][p.Partition]
				if !ok {
					continue
				}
				m.events = append(m.events, GroupEvent{Member: m.id, Kind: Committed, Partition: fmt.Sprintf("%s/%d", t.Topic, p.Partition),
					Offset: eo.Offset, StartNs: start, EndNs: end})
			}
		}
	})
}

// committedAt is the highest offset the member has committed on each
// partition it committed on.
func (m *member) committedAt() map[string]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int64{}
	for _, e := range m.events {
		if e.Kind == Committed && e.Offset > out[e.Partition] {
			out[e.Partition] = e.Offset
		}
	}
	return out
}

// history copies the member's events, poll errors and failed commits.
func (m *member) history() ([]GroupEvent, int, []string, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]GroupEvent(nil), m.events...), m.errCount, append([]string(nil), m.errs...), m.commitErrs
}

// GroupResult is what CheckGroup found.
type GroupResult struct {
	// Polled counts the records the members polled, Redelivered those
	// polled more than once (a rebalance's at-least-once: allowed),
	// Commits the commits answered without error.
	Polled, Redelivered, Commits int
	Violations                   []Violation
	Counts                       map[string]int
}

// CheckGroup checks a group's history (every member's events, each
// member's in the order they happened) against the partitions' final
// logs (logs[name] in offset order, dense from 0 to the high watermark,
// read back after the run). The anomalies, after Jepsen's queue checker:
//
//   - "poll-backwards": a member polled an offset at or below one it had
//     polled earlier in the same assignment of the partition;
//   - "poll-skip": a member's next poll in one assignment was past the
//     offset after the last (offsets are dense: nothing lies between);
//   - "inconsistent": a polled offset held another record than the final
//     log's at that offset, or lies past the log's end;
//   - "unseen": an offset below the high watermark no member ever polled;
//   - "commit-backwards": a commit answered without error set a lower
//     offset than a commit that had been answered before it started.
func CheckGroup(events []GroupEvent, logs map[string][]Written) GroupResult {
	res := GroupResult{Counts: map[string]int{}}
	add := func(name, what, format string, args ...any) {
		res.Counts[what]++
		if len(res.Violations) < violationsMax {
			res.Violations = append(res.Violations, Violation{name, what, fmt.Sprintf(format, args...)})
		}
	}
	type owner struct {
		member int
		part   string
	}
	last := map[owner]int64{} // the last offset polled in the current assignment (absent: none yet)
	seen := map[string]map[int64]int{}
	commits := map[string][]GroupEvent{}
	for _, e := range events {
		o := owner{e.Member, e.Partition}
		switch e.Kind {
		case Assigned, Revoked, Lost:
			delete(last, o)
		case Committed:
			res.Commits++
			commits[e.Partition] = append(commits[e.Partition], e)
		case Polled:
			res.Polled++
			if prev, ok := last[o]; ok {
				switch {
				case e.Offset <= prev:
					add(e.Partition, "poll-backwards", "member %d polled offset %d after %d in one assignment", e.Member, e.Offset, prev)
				case e.Offset > prev+1:
					add(e.Partition, "poll-skip", "member %d polled offset %d after %d in one assignment (skipped %d)", e.Member, e.Offset, prev, e.Offset-prev-1)
				}
			}
			last[o] = e.Offset
			if seen[e.Partition] == nil {
				seen[e.Partition] = map[int64]int{}
			}
			seen[e.Partition][e.Offset]++
			if seen[e.Partition][e.Offset] == 2 {
				res.Redelivered++
			}
			log := logs[e.Partition]
			switch {
			case e.Offset < 0 || e.Offset >= int64(len(log)) || log[e.Offset].Offset != e.Offset:
				add(e.Partition, "inconsistent", "member %d polled offset %d (record %d), not in the final log of %d records", e.Member, e.Offset, e.Seq, len(log))
			case e.Seq < 0 || len(log[e.Offset].Key) != 8 || int64(binary.BigEndian.Uint64(log[e.Offset].Key)) != e.Seq:
				add(e.Partition, "inconsistent", "member %d polled record %d at offset %d; the final log has another there", e.Member, e.Seq, e.Offset)
			}
		}
	}
	names := make([]string, 0, len(logs))
	for name := range logs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for off := range int64(len(logs[name])) {
			if seen[name][off] == 0 {
				add(name, "unseen", "offset %d (of %d) was never polled", off, len(logs[name]))
			}
		}
		checkCommits(name, commits[name], add)
	}
	return res
}

// checkCommits flags a commit below one answered before it started.
func checkCommits(name string, cs []GroupEvent, add func(name, what, format string, args ...any)) {
	byEnd := append([]GroupEvent(nil), cs...)
	sort.SliceStable(byEnd, func(i, j int) bool { return byEnd[i].EndNs < byEnd[j].EndNs })
	byStart := append([]GroupEvent(nil), cs...)
	sort.SliceStable(byStart, func(i, j int) bool { return byStart[i].StartNs < byStart[j].StartNs })
	high, from, j := int64(-1), -1, 0
	for _, c := range byStart {
		for ; j < len(byEnd) && byEnd[j].EndNs < c.StartNs; j++ {
			if byEnd[j].Offset > high {
				high, from = byEnd[j].Offset, byEnd[j].Member
			}
		}
		if c.Offset < high {
			add(name, "commit-backwards", "member %d committed %d after member %d's commit of %d was answered", c.Member, c.Offset, from, high)
		}
	}
}

// GroupReport is what the group did and what CheckGroup found in it.
type GroupReport struct {
	Members int
	// Polled, Redelivered and Commits are CheckGroup's; CommitErrors
	// counts commits (per partition) answered with an error, PollErrors
	// the members' failed fetches (FirstErrors the first texts).
	Polled, Redelivered, Commits, CommitErrors, PollErrors int
	FirstErrors                                            []string
	// CaughtUp says whether the group had committed every partition's
	// high watermark within the wait after the run.
	CaughtUp   bool
	Violations []Violation
	Counts     map[string]int
}

// startGroup starts the consumer group's members, each on a client whose
// first seed is another node.
func (r *run) startGroup(c kafkaConf) error {
	if r.o.GroupMembers <= 0 {
		return nil
	}
	var topics []string
	for _, f := range r.o.Factors {
		topics = append(topics, topicPrefix+strconv.Itoa(f))
	}
	gctx, stop := context.WithCancel(context.Background())
	r.stopGroup = stop
	for i := 1; i <= r.o.GroupMembers; i++ {
		m, err := newMember(i, c, topics, r.clock)
		if err != nil {
			return err
		}
		r.members = append(r.members, m)
		r.groupWG.Add(1)
		go func() {
			defer r.groupWG.Done()
			m.run(gctx)
		}()
	}
	return nil
}

// checkGroup waits (bounded) until the group has committed every
// partition's high watermark, stops its members and checks their
// history against the logs read back.
func (r *run) checkGroup(ctx context.Context) error {
	if len(r.members) == 0 {
		return nil
	}
	logs := map[string][]Written{}
	for _, w := range r.writers {
		logs[w.part.String()] = r.logs[w.part.String()]
	}
	caughtUp := func() bool {
		high := map[string]int64{}
		for _, m := range r.members {
			for name, off := range m.committedAt() {
				high[name] = max(high[name], off)
			}
		}
		for name, log := range logs {
			if high[name] < int64(len(log)) {
				return false
			}
		}
		return true
	}
	deadline := time.Now().Add(drainWaitMax)
	rep := &GroupReport{Members: len(r.members)}
	for !rep.CaughtUp && time.Now().Before(deadline) && ctx.Err() == nil {
		if rep.CaughtUp = caughtUp(); !rep.CaughtUp {
			select {
			case <-ctx.Done():
			case <-time.After(settlePollEvery):
			}
		}
	}
	r.stopGroup()
	r.groupWG.Wait()
	r.stopGroup = nil
	var events []GroupEvent
	for _, m := range r.members {
		ev, pollErrs, errs, commitErrs := m.history()
		events = append(events, ev...)
		rep.PollErrors += pollErrs
		rep.CommitErrors += commitErrs
		if len(rep.FirstErrors) < groupErrorsMax {
			rep.FirstErrors = append(rep.FirstErrors, errs...)
		}
	}
	res := CheckGroup(events, logs)
	rep.Polled, rep.Redelivered, rep.Commits, rep.Violations, rep.Counts = res.Polled, res.Redelivered, res.Commits, res.Violations, res.Counts
	r.rep.Group = rep
	r.logf("consumer group of %d: %d records polled (%d again), %d commits, caught up: %v, %d violations", rep.Members, rep.Polled, rep.Redelivered,
		rep.Commits, rep.CaughtUp, len(rep.Violations))
	return nil
}
