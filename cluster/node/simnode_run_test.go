package node

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/shard/partition"
)

var (
	simNodeSeedFlag   = flag.Int64("simnode.seed", -1, "run only this whole-node simulation seed, with a trace (replay)")
	simNodeSeedsFlag  = flag.Int("simnode.seeds", 100, "number of whole-node simulation seeds to run")
	simNodeFirstFlag  = flag.Int64("simnode.first-seed", 1, "first whole-node simulation seed")
	simNodeNodesFlag  = flag.Int("simnode.nodes", 0, "roster size of every whole-node simulation (0: drawn, 3 or 5)")
	simNodeFaultyFlag = flag.Duration("simnode.faulty", 5*time.Second, "simulated time of the adversarial phase of each whole-node seed")
)

func simNodeReplayCmd(seed int64, nodes int) string {
	extra := ""
	if nodes != 0 {
		extra += fmt.Sprintf(" -simnode.nodes=%d", nodes)
	}
	if *simNodeFaultyFlag != 5*time.Second {
		extra += fmt.Sprintf(" -simnode.faulty=%v", *simNodeFaultyFlag)
	}
	return fmt.Sprintf("go test ./cluster/node -run 'TestSimNode$' -simnode.seed=%d%s -v", seed, extra)
}

const (
	// snWarmUp is the time before the first fault.
	snWarmUp = 1500 * time.Millisecond
	// snProduceAfterHeal is how long clients start new batches after
	// the heal.
	snProduceAfterHeal = 1500 * time.Millisecond
)

// snTopic is a topic the admin client creates (and, for the scratch
// topic, deletes).
type snTopic struct {
	idx     int
	name    string
	parts   int32
	rf      int16
	scratch bool
	// acked: the create was acknowledged (id known once a View has it);
	// deleted: the delete was.
	acked, deleted bool
	id             metadata.TopicID
	// attempt numbers the admin calls, so that a stale answer is ignored.
	attempt int
	guess   int32
	rng     *rand.Rand
	ops     uint64
}

// snAckKey names one acknowledged batch; snAck is where.
type snAckKey struct {
	topic int
	p     int32
	pid   int64
	seq   int32
}

type snAck struct {
	base int64
	n    int32
}

// snClient is an idempotent producer of one topic: one batch in flight,
// retried with the same sequence until acknowledged.
type snClient struct {
	s     *snSim
	id    int
	t     *snTopic
	pid   int64
	rng   *rand.Rand
	seq   map[int32]int32
	guess map[int32]int32
	cur   *snBatch
	ops   uint64
}

type snBatch struct {
	p       int32
	seq, n  int32
	data    []byte
	attempt int
}

func (t *snTopic) at(s *snSim, d time.Duration, fn func()) {
	t.ops++
	s.pushKeyed(d, 1<<61|uint64(t.idx), t.ops, fn)
}

func (c *snClient) at(d time.Duration, fn func()) {
	c.ops++
	c.s.pushKeyed(d, 1<<62|uint64(c.id), c.ops, fn)
}

// create sends the topic's CreateTopic to the node it guesses leads the
// metadata, through that node's service as a front end calls it.
func (s *snSim) create(t *snTopic) {
	if t.acked || s.err != nil {
		return
	}
	t.attempt++
	a := t.attempt
	s.stats.AdminCalls++
	nd := s.node(t.guess)
	t.at(s, 5*time.Second, func() { // silence: retry elsewhere
		if t.attempt == a && !t.acked {
			t.guess = int32(1 + t.rng.IntN(s.p.n))
			s.create(t)
		}
	})
	if !nd.up {
		return
	}
	sh := nd.n.group.Shard(0)
	req := &service.CreateTopicRequest{Name: t.name, Partitions: t.parts, ReplicationFactor: t.rf, Timeout: 3 * time.Second}
	_ = sh.Post(func() {
		nd.n.svc.CreateTopic(sh, req, func(res service.CreateTopicResult, err error) {
			if t.attempt != a || t.acked {
				return
			}
			switch {
			case err == nil:
				t.acked, t.id = true, res.ID
			case errors.Is(err, service.ErrTopicExists) && a > 1:
				t.acked = true // an earlier attempt created it; its id comes from a View
			default:
				s.adminRetry(t, err, func() { s.create(t) })
				return
			}
			s.stats.TopicsCreated++
			s.tracef("topic %s created (id %x, attempt %d)", t.name, t.id[:4], a)
			if t.scratch {
				t.at(s, time.Duration(200+t.rng.IntN(2000))*time.Millisecond, func() { s.remove(t) })
				return
			}
			for i := 0; i < s.p.clients; i++ {
				s.startClient(t)
			}
			if s.groups != nil {
				s.groups.start(t)
			}
		})
	})
}

// remove deletes the scratch topic.
func (s *snSim) remove(t *snTopic) {
	if t.deleted || s.err != nil {
		return
	}
	t.attempt++
	a := t.attempt
	s.stats.AdminCalls++
	nd := s.node(t.guess)
	t.at(s, 5*time.Second, func() {
		if t.attempt == a && !t.deleted {
			t.guess = int32(1 + t.rng.IntN(s.p.n))
			s.remove(t)
		}
	})
	if !nd.up {
		return
	}
	sh := nd.n.group.Shard(0)
	req := &service.DeleteTopicRequest{Name: t.name, Timeout: 3 * time.Second}
	_ = sh.Post(func() {
		nd.n.svc.DeleteTopic(sh, req, func(_ metadata.TopicID, err error) {
			if t.attempt != a || t.deleted {
				return
			}
			if err != nil && !(errors.Is(err, service.ErrUnknownTopicOrPartition) && a > 1) {
				s.adminRetry(t, err, func() { s.remove(t) })
				return
			}
			t.deleted = true
			s.stats.TopicsDeleted++
			s.tracef("topic %s deleted (attempt %d)", t.name, a)
		})
	})
}

// adminRetry retries an admin call at the hinted metadata primary, or
// another node, after a short wait.
func (s *snSim) adminRetry(t *snTopic, err error, again func()) {
	var se *service.Error
	if errors.As(err, &se) && se.Hint != nil && se.Hint.NodeID > 0 {
		t.guess = se.Hint.NodeID
	} else {
		t.guess = int32(1 + t.rng.IntN(s.p.n))
	}
	a := t.attempt
	t.at(s, time.Duration(20+t.rng.IntN(100))*time.Millisecond, func() {
		if t.attempt == a {
			again()
		}
	})
}

func (s *snSim) startClient(t *snTopic) {
	c := &snClient{s: s, id: len(s.clients), t: t, pid: int64(1000 + len(s.clients)),
		rng: rand.New(rand.NewPCG(uint64(s.seed), uint64(len(s.clients)))), seq: map[int32]int32{}, guess: map[int32]int32{}}
	s.clients = append(s.clients, c)
	c.at(time.Millisecond, c.next)
}

func (c *snClient) next() {
	s := c.s
	if c.cur != nil || !s.producing || s.err != nil {
		return
	}
	p := int32(c.rng.IntN(int(c.t.parts)))
	n := int32(1 + c.rng.IntN(3))
	b, err := batch.NewBuilder(batch.Options{Idempotent: true, ProducerID: c.pid, BaseSequence: c.seq[p]})
	if err != nil {
		s.fail("builder: %v", err)
		return
	}
	for i := int32(0); i < n; i++ {
		if err := b.AppendKV(s.now().Milliseconds(), nil, fmt.Appendf(nil, "c%d-p%d-s%d", c.id, p, c.seq[p]+i)); err != nil {
			s.fail("append: %v", err)
			return
		}
	}
	data, err := b.Build()
	if err != nil {
		s.fail("build: %v", err)
		return
	}
	if c.guess[p] == 0 {
		c.guess[p] = int32(1 + c.rng.IntN(s.p.n))
	}
	c.cur = &snBatch{p: p, seq: c.seq[p], n: n, data: data}
	c.try()
}

// try sends the current batch's next attempt to the node the client
// believes leads its partition, through that node's service.
func (c *snClient) try() {
	s, b := c.s, c.cur
	b.attempt++
	a := b.attempt
	nd := s.node(c.guess[b.p])
	s.stats.Produced++
	if a > 1 {
		s.stats.Retries++
	}
	if !nd.up {
		c.guess[b.p] = int32(1 + c.rng.IntN(s.p.n))
		c.at(time.Duration(5+c.rng.IntN(20))*time.Millisecond, c.retry(b, a))
		return
	}
	sh := nd.n.group.Shard(0)
	req := &service.ProduceRequest{PartitionRef: service.PartitionRef{Topic: c.t.name, Partition: b.p, TopicID: c.t.id,
		Generation: service.GenerationUnknown}, Acks: service.AcksQuorum, Timeout: 2 * time.Second, Records: b.data}
	if err := sh.Post(func() {
		nd.n.svc.Produce(sh, req, func(res service.ProduceResult, err error) { c.answer(b, a, res, err) })
	}); err != nil {
		s.fail("posting a produce: %v", err)
	}
	c.at(snAttemptMax, c.retry(b, a))
}

func (c *snClient) retry(b *snBatch, a int) func() {
	return func() {
		if c.cur == b && b.attempt == a {
			if c.rng.IntN(2) == 0 {
				c.guess[b.p] = int32(1 + c.rng.IntN(c.s.p.n))
			}
			c.try()
		}
	}
}

// answer handles attempt a of b's answer: an acknowledgement counts
// whichever attempt it answers; an error only for the current attempt.
func (c *snClient) answer(b *snBatch, a int, res service.ProduceResult, err error) {
	s := c.s
	if err == nil {
		k := snAckKey{topic: c.t.idx, p: b.p, pid: c.pid, seq: b.seq}
		if prev, ok := s.acks[k]; ok {
			if prev.base != res.BaseOffset {
				s.fail("%s/%d: producer %d's batch seq %d acknowledged at offsets %d and %d", c.t.name, b.p, c.pid, b.seq, prev.base, res.BaseOffset)
			}
		} else {
			s.acks[k] = snAck{base: res.BaseOffset, n: b.n}
			s.stats.Acked++
			s.tracef("ack %s/%d pid %d seq %d at %d", c.t.name, b.p, c.pid, b.seq, res.BaseOffset)
		}
		if c.cur == b {
			c.cur = nil
			c.seq[b.p] += b.n
			c.at(time.Duration(1+c.rng.IntN(s.p.thinkMaxMs+1))*time.Millisecond, c.next)
		}
		return
	}
	if c.cur != b || b.attempt != a {
		return
	}
	for _, k := range []error{partition.ErrOutOfOrderSequence, partition.ErrUnknownProducer, partition.ErrDuplicateSequence,
		partition.ErrCorruptBatch, partition.ErrInvalidBatch} {
		if errors.Is(err, k) {
			s.fail("client %d: %s/%d seq %d refused: %v", c.id, c.t.name, b.p, b.seq, err)
			return
		}
	}
	var se *service.Error
	delay := time.Duration(5+c.rng.IntN(30)) * time.Millisecond
	if errors.As(err, &se) {
		if se.Hint != nil && se.Hint.NodeID > 0 {
			c.guess[b.p] = se.Hint.NodeID
		} else {
			c.guess[b.p] = int32(1 + c.rng.IntN(s.p.n))
		}
		if se.RetryAfterMs > 0 {
			delay = time.Duration(se.RetryAfterMs) * time.Millisecond
		}
	}
	c.at(delay, c.retry(b, a))
}

// fault injects one drawn fault and schedules the next.
func (s *snSim) fault(until time.Duration) {
	if s.now() >= until || s.err != nil {
		return
	}
	switch r := s.rng.Float64(); {
	case r < s.p.crashP:
		var ups []*snNode
		down := 0
		for _, nd := range s.nodes {
			if nd.up {
				ups = append(ups, nd)
			} else {
				down++
			}
		}
		if down+1 <= (s.p.n-1)/2 && len(ups) > 0 {
			nd := ups[s.rng.IntN(len(ups))]
			if s.groups != nil && s.rng.IntN(2) == 0 {
				// Half of the crashes take the group's coordinator.
				if c := s.groups.coordinatorNode(); c != nil {
					nd = c
					s.groups.stats.CoordinatorCrashes++
					s.tracef("group: the coordinator's node %d is crashed", c.id)
				}
			}
			nd.crash(s.rng.Float64() < s.p.powerLossP)
			s.at(time.Duration(100+s.rng.IntN(3000))*time.Millisecond, func() {
				if !nd.up {
					nd.start()
				}
			})
		}
	case r < s.p.crashP+s.p.jumpP:
		nd := s.nodes[s.rng.IntN(len(s.nodes))]
		d := time.Duration(s.rng.IntN(4000)-1500) * time.Millisecond
		nd.wallOffsetNs += int64(d)
		s.stats.ClockJumps++
		s.tracef("node %d's clock jumps %v", nd.id, d)
	default:
		oneWay := s.rng.IntN(3) == 0
		var side []bool
		for range s.p.n + 1 {
			side = append(side, s.rng.IntN(2) == 0)
		}
		for a := 1; a <= s.p.n; a++ {
			for b := 1; b <= s.p.n; b++ {
				if side[a] && !side[b] {
					s.cut[a][b] = true
					if !oneWay {
						s.cut[b][a] = true
					}
				}
			}
		}
		s.stats.Partitions++
		s.tracef("partition %v (one way %v)", side[1:], oneWay)
		s.at(time.Duration(200+s.rng.IntN(3000))*time.Millisecond, s.heal)
	}
	s.at(time.Duration(s.p.faultGapMs/2+s.rng.IntN(s.p.faultGapMs))*time.Millisecond, func() { s.fault(until) })
}

func (s *snSim) heal() {
	for a := range s.cut {
		for b := range s.cut[a] {
			s.cut[a][b] = false
		}
	}
}

// metaPrimary is the up node whose metadata replica leads, or nil.
func (s *snSim) metaPrimary() *snNode {
	var out *snNode
	for _, nd := range s.nodes {
		if nd.up && nd.n.ctrl != nil && nd.n.ctrl.r != nil && nd.n.ctrl.r.IsPrimary() {
			if out != nil {
				return nil // two think they lead: not settled
			}
			out = nd
		}
	}
	return out
}

// settledWhy is "" once the healed cluster has settled: every admin call
// and batch acknowledged, one metadata primary whose View every node has
// loaded, and every live partition's replicas open and at their
// primary's high watermark and log end; else what is still missing.
func (s *snSim) settledWhy() string {
	for _, t := range s.topics {
		if !t.acked || (t.scratch && !t.deleted) {
			return fmt.Sprintf("topic %s: admin call pending", t.name)
		}
	}
	for _, c := range s.clients {
		if c.cur != nil {
			return fmt.Sprintf("client %d: a batch unacknowledged", c.id)
		}
	}
	mp := s.metaPrimary()
	if mp == nil {
		return "no single metadata primary"
	}
	if b := mp.n.ctrl.bal; b != nil {
		if m, ok := b.InFlight(); ok {
			return fmt.Sprintf("the balancer's move of %s is in flight", m.Key)
		}
	}
	want := mp.view()
	for _, nd := range s.nodes {
		v := nd.view()
		if v == nil || !nd.n.metaLoaded.Load() || nd.n.ctrl == nil || nd.n.ctrl.Applied() != mp.n.ctrl.Applied() {
			detail := "no metadata replica"
			if c := nd.n.ctrl; c != nil && c.r != nil {
				lead, term := c.r.Route()
				detail = fmt.Sprintf("applied %d, loaded %v, replica at %d/%d, primary %d in generation %d, primary's at %d/%d",
					v.Applied, nd.n.metaLoaded.Load(), c.r.CommitEnd(), c.r.Log().LogEndOffset(), lead, term,
					mp.n.ctrl.r.CommitEnd(), mp.n.ctrl.r.Log().LogEndOffset())
			}
			return fmt.Sprintf("node %d: metadata not at the primary's %d (%s)", nd.id, mp.n.ctrl.Applied(), detail)
		}
	}
	for _, t := range want.Sorted {
		for p, reps := range t.Replicas {
			var prim *partition.Replica
			for _, id := range reps {
				if r := s.node(int32(id)).replica(t.ID, int32(p)); r != nil && r.IsPrimary() {
					prim = r
				}
			}
			if prim == nil {
				return fmt.Sprintf("%s/%d: no primary", t.Name, p)
			}
			hw, leo := prim.CommitEnd(), prim.Log().LogEndOffset()
			if hw != leo {
				return fmt.Sprintf("%s/%d: primary at %d/%d", t.Name, p, hw, leo)
			}
			for _, id := range reps {
				r := s.node(int32(id)).replica(t.ID, int32(p))
				if r == nil || r.CommitEnd() != hw || r.Log().LogEndOffset() != leo || r.Log().WrittenOffset() < leo-1 {
					return fmt.Sprintf("%s/%d: node %d behind", t.Name, p, id)
				}
			}
		}
	}
	if s.groups != nil {
		return s.groups.settledWhy()
	}
	return ""
}

// check verifies the settled cluster: the committed metadata on every
// node, the acknowledged topics and deletions in it and in the replicas
// open, every acknowledged batch where it was acknowledged, and every
// replica byte-identical to its primary below the high watermark.
func (s *snSim) check() {
	mp := s.metaPrimary()
	want := mp.view()
	sig := func(v *View) string {
		var b strings.Builder
		for _, t := range v.Sorted {
			fmt.Fprintf(&b, "%s %x %v;", t.Name, t.ID, t.Replicas)
		}
		return b.String()
	}
	for _, nd := range s.nodes {
		if got := sig(nd.view()); got != sig(want) {
			s.fail("node %d's metadata differs from the primary's: %s, want %s", nd.id, got, sig(want))
			return
		}
	}
	for _, t := range s.topics {
		vt := want.Topics[t.name]
		switch {
		case t.scratch && vt != nil:
			s.fail("topic %s was deleted, but the metadata still has it", t.name)
			return
		case t.scratch:
			for _, nd := range s.nodes {
				for p := int32(0); p < t.parts; p++ {
					if !t.id.IsZero() && nd.replica(t.id, p) != nil {
						s.fail("topic %s was deleted, but node %d still has partition %d open", t.name, nd.id, p)
						return
					}
				}
			}
		case vt == nil:
			s.fail("topic %s was acknowledged, but the metadata lacks it", t.name)
			return
		case !t.id.IsZero() && vt.ID != t.id:
			s.fail("topic %s was acknowledged with id %x, the metadata has %x", t.name, t.id, vt.ID)
			return
		default:
			t.id = vt.ID
		}
	}
	for k, a := range s.acks {
		t := s.topics[k.topic]
		vt := want.Topics[t.name]
		var prim *partition.Replica
		for _, id := range vt.Replicas[k.p] {
			if r := s.node(int32(id)).replica(vt.ID, k.p); r != nil && r.IsPrimary() {
				prim = r
			}
		}
		pl := prim.Log()
		data, ok := dsReadLog(pl, pl.RaftOffset(a.base), pl.RaftOffset(a.base+int64(a.n)-1))
		if !ok {
			s.fail("%s/%d: acknowledged batch at %d unreadable", t.name, k.p, a.base)
			return
		}
		h, err := batch.ReadHeader(data)
		if err != nil || h.BaseOffset != a.base || h.ProducerID != k.pid || h.BaseSequence != k.seq || h.RecordCount != a.n {
			s.fail("%s/%d: at %d, want producer %d seq %d (%d records), found %+v (%v)", t.name, k.p, a.base, k.pid, k.seq, a.n, h, err)
			return
		}
		s.stats.BatchesChecked++
		s.stats.RecordsChecked += int(a.n)
	}
	for _, t := range want.Sorted {
		for p, reps := range t.Replicas {
			var prim *partition.Replica
			for _, id := range reps {
				if r := s.node(int32(id)).replica(t.ID, int32(p)); r != nil && r.IsPrimary() {
					prim = r
				}
			}
			hw := prim.CommitEnd()
			if err := dsCheckDense(prim.Log(), hw); prim.Config().DenseOffsets && err != nil {
				s.fail("%s/%d: primary's offsets: %v", t.Name, p, err)
				return
			}
			for _, id := range reps {
				r := s.node(int32(id)).replica(t.ID, int32(p))
				from := max(r.Log().LogStartOffset(), prim.Log().LogStartOffset())
				if hw == 0 || from >= hw {
					continue
				}
				a, okA := dsReadLog(prim.Log(), from, hw-1)
				b, okB := dsReadLog(r.Log(), from, hw-1)
				if !okA || !okB || !bytes.Equal(a, b) {
					s.fail("%s/%d: node %d's log differs from the primary's below the high watermark %d", t.Name, p, id, hw)
					return
				}
			}
		}
	}
}

// runNodeSim runs one seed: topics created (and one deleted) through the
// service while clients produce, faults for the adversarial phase
// faulty, then the heal, the settling and the checks.
func runNodeSim(seed int64, nodes int, faulty time.Duration, trace func(string)) (snStats, error) {
	return newSnSim(seed, nodes, trace).run(faulty)
}

// runNodeSimGroups runs one seed with the groups scenario
// (simnode_groups_test.go) on top.
func runNodeSimGroups(seed int64, nodes int, faulty time.Duration, trace func(string)) (snStats, snGroupStats, error) {
	s := newSnSim(seed, nodes, trace)
	s.groups = newSnGroups(s)
	st, err := s.run(faulty)
	return st, s.groups.stats, err
}

// run runs the seed's topics, clients and faults.
func (s *snSim) run(faulty time.Duration) (st snStats, err error) {
	seed := s.seed
	defer func() {
		if p := recover(); p != nil {
			s.fail("panic: %v\n%s", p, debug.Stack())
		}
		// The shards hold descriptors (epoll, eventfd, timerfd): a run
		// that left them open ran out of them after a few hundred seeds.
		for _, nd := range s.nodes {
			if nd.up {
				nd.n.group.AbandonStepped()
				nd.up = false
			}
		}
		st, err = s.stats, s.err
	}()
	for _, nd := range s.nodes {
		nd.start()
	}
	count := s.p.topics
	if s.p.scratch {
		count++
	}
	for i := 0; i < count; i++ {
		t := &snTopic{idx: i, name: fmt.Sprintf("t%d", i), parts: int32(1 + s.rng.IntN(3)), rf: int16(min(3, s.p.n)),
			scratch: s.p.scratch && i == count-1, guess: int32(1 + s.rng.IntN(s.p.n)),
			rng: rand.New(rand.NewPCG(uint64(seed), 1<<32|uint64(i)))}
		s.topics = append(s.topics, t)
		t.at(s, time.Duration(300+s.rng.IntN(int(faulty/time.Millisecond)/2+1))*time.Millisecond, func() { s.create(t) })
	}
	start := s.now()
	// The first fault comes once the metadata group could have formed.
	s.at(snWarmUp+time.Duration(s.rng.IntN(s.p.faultGapMs))*time.Millisecond, func() { s.fault(start + faulty) })
	s.runUntil(start+faulty, nil)
	if s.err != nil {
		return
	}
	s.heal()
	// Clients go on for a while on the healed cluster (a topic created
	// late has had no time under faults), then finish what is in flight.
	s.at(snProduceAfterHeal, func() { s.producing = false })
	for _, nd := range s.nodes {
		if !nd.up {
			nd.start()
		}
	}
	healed := s.now()
	s.tracef("healed; settling")
	s.runUntil(healed+snSettleMax, func() bool { return s.settledWhy() == "" })
	if s.err != nil {
		return
	}
	if why := s.settledWhy(); why != "" {
		s.fail("not settled %v after the heal: %s", snSettleMax, why)
		return
	}
	for _, nd := range s.nodes {
		s.stats.PrimaryMoves += int(nd.n.balanceStats.Finished.Load())
	}
	s.check()
	if s.groups != nil && s.err == nil {
		s.groups.check()
	}
	return
}

// TestSimNode runs the whole-node simulator over many seeds
// (-simnode.seeds from -simnode.first-seed), or one seed with a trace
// (-simnode.seed). A failing seed prints the command that replays it.
func TestSimNode(t *testing.T) {
	if *simNodeSeedFlag >= 0 {
		var lines []string
		st, err := runNodeSim(*simNodeSeedFlag, *simNodeNodesFlag, *simNodeFaultyFlag, func(l string) { lines = append(lines, l) })
		for _, l := range lines {
			t.Log(l)
		}
		t.Logf("seed %d: %+v", *simNodeSeedFlag, st)
		if err != nil {
			t.Fatalf("seed %d: %v\nreplay: %s", *simNodeSeedFlag, err, simNodeReplayCmd(*simNodeSeedFlag, *simNodeNodesFlag))
		}
		return
	}
	count := *simNodeSeedsFlag
	if testing.Short() {
		count = min(count, 10)
	}
	runNodeSeeds(t, count, *simNodeNodesFlag)
}

func runNodeSeeds(t *testing.T, count, nodes int) {
	start := time.Now()
	var mu sync.Mutex
	var total snStats
	var failed []string
	seeds := make(chan int64)
	var wg sync.WaitGroup
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seed := range seeds {
				st, err := runNodeSim(seed, nodes, *simNodeFaultyFlag, nil)
				mu.Lock()
				total.add(st)
				if err != nil {
					failed = append(failed, fmt.Sprintf("seed %d: %v\nreplay: %s", seed, err, simNodeReplayCmd(seed, nodes)))
				}
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < count; i++ {
		seeds <- *simNodeFirstFlag + int64(i)
	}
	close(seeds)
	wg.Wait()
	el := time.Since(start)
	t.Logf("%d seeds (nodes %d) in %v, %.1f seeds/s: %+v", count, nodes, el.Round(time.Millisecond), float64(count)/el.Seconds(), total)
	sort.Strings(failed)
	for i, f := range failed {
		if i == 5 {
			t.Errorf("... and %d more", len(failed)-5)
			break
		}
		t.Error(f)
	}
}

// TestSimNodeReplays holds that a seed replays: two runs trace the same
// lines; and that a run gives back its shards' descriptors (10,000 seeds
// ran out of them when it did not).
func TestSimNodeReplays(t *testing.T) {
	fds := func() int {
		names, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Skip("no /proc/self/fd")
		}
		return len(names)
	}
	before := fds()
	defer func() {
		if after := fds(); after > before+4 {
			t.Errorf("%d descriptors open after four runs, %d before", after, before)
		}
	}()
	for _, seed := range []int64{3, 8} {
		var a, b []string
		_, errA := runNodeSim(seed, 0, 2*time.Second, func(l string) { a = append(a, l) })
		_, errB := runNodeSim(seed, 0, 2*time.Second, func(l string) { b = append(b, l) })
		if (errA == nil) != (errB == nil) {
			t.Fatalf("seed %d: %v, then %v", seed, errA, errB)
		}
		if strings.Join(a, "\n") != strings.Join(b, "\n") {
			for i := range min(len(a), len(b)) {
				if a[i] != b[i] {
					t.Fatalf("seed %d: the runs differ at line %d:\n%s\n%s", seed, i, a[i], b[i])
				}
			}
			t.Fatalf("seed %d: %d lines, then %d", seed, len(a), len(b))
		}
	}
}
