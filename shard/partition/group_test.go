package partition

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/segment/vfs"
	"github.com/corestream/corestream/shard"
)

// testGroup is one partition group whose replicas each run on their own
// shard with their own Host, as on separate nodes. Messages travel through
// the shards' inboxes (never blocking a shard); appends by reference are
// filled from the sender's log, as the node layer does with sendfile.
type testGroup struct {
	t    *testing.T
	root string
	mu   sync.Mutex
	// members by node id; guarded by mu (the replicas themselves are
	// touched only on their shard).
	members map[raftlite.NodeID]*testMember
	// logCfg configures every member's log.
	logCfg segment.Config
	// drop, when set, loses the messages it returns true for (a network
	// fault); guarded by mu.
	drop func(from raftlite.NodeID, m raftlite.Message) bool
	// fsOf, when it holds a member, is that member's file system (the OS
	// one otherwise); set before the member starts.
	fsOf map[raftlite.NodeID]vfs.FS
	// segments wires catch-up by whole segments (segcatch_test.go).
	segments bool
}

// setDrop installs (nil: removes) the message filter.
func (tg *testGroup) setDrop(drop func(from raftlite.NodeID, m raftlite.Message) bool) {
	tg.mu.Lock()
	tg.drop = drop
	tg.mu.Unlock()
}

type testMember struct {
	id   raftlite.NodeID
	g    *shard.Group
	sh   *shard.Shard
	host *Host
	r    *Replica
}

// tickEvery is the consensus tick of the group tests: with the default
// limits an election timeout is 10-20 ticks.
const groupTickEvery = 10 * time.Millisecond

func newTestGroup(t *testing.T) *testGroup {
	tg := &testGroup{t: t, root: t.TempDir(), members: map[raftlite.NodeID]*testMember{},
		logCfg: segment.Config{Fsync: segment.FsyncNever, BatchBytesMax: 1 << 20, SegmentBytes: 64 << 10}}
	t.Cleanup(func() {
		for _, id := range tg.ids() {
			tg.stop(id)
		}
	})
	return tg
}

// dir is member id's replica directory.
func (tg *testGroup) dir(id raftlite.NodeID) string { return fmt.Sprintf("%s/n%d/p0", tg.root, id) }

func (tg *testGroup) ids() []raftlite.NodeID {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	var out []raftlite.NodeID
	for id := raftlite.NodeID(1); id <= raftlite.NodeIDMax; id++ {
		if tg.members[id] != nil {
			out = append(out, id)
		}
	}
	return out
}

func (tg *testGroup) member(id raftlite.NodeID) *testMember {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return tg.members[id]
}

// start opens node id's replica with the given configuration (what the
// node layer would pass: the metadata's replica set, and the learners when
// it joins a running group).
func (tg *testGroup) start(id raftlite.NodeID, replicas, learners []raftlite.NodeID) *testMember {
	t := tg.t
	t.Helper()
	g, err := shard.NewGroup(shard.Config{Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	m := &testMember{id: id, g: g, sh: g.Shard(0)}
	fsys := vfs.FS(vfs.OS())
	if f := tg.fsOf[id]; f != nil {
		fsys = f
	}
	m.do(t, func() {
		if m.host, err = NewHost(m.sh, testEngine(fsys), groupTickEvery, 0); err != nil {
			return
		}
		cfg := Config{DenseOffsets: true, FS: fsys, Dir: tg.dir(id),
			Log:   tg.logCfg,
			Topic: "t", TopicID: [16]byte{1}, Partition: 0, Self: id, Replicas: replicas, Learners: learners,
			Send: tg.send}
		if tg.segments {
			cfg.SendSegment, cfg.AnswerSegment = tg.sendSegment, tg.answerSegment
		}
		m.r, err = m.host.Open(cfg)
	})
	if err != nil {
		t.Fatalf("node %d: %v", id, err) // not on the shard: t.Fatal there would end its goroutine
	}
	tg.mu.Lock()
	tg.members[id] = m
	tg.mu.Unlock()
	return m
}

// stop closes node id's replica and shard (a clean stop of the node).
func (tg *testGroup) stop(id raftlite.NodeID) {
	tg.mu.Lock()
	m := tg.members[id]
	delete(tg.members, id)
	tg.mu.Unlock()
	if m == nil {
		return
	}
	m.do(tg.t, func() { m.host.Close(nil) })
	if err := m.g.Stop(); err != nil {
		tg.t.Errorf("stop node %d: %v", id, err)
	}
}

func (m *testMember) do(t *testing.T, fn func()) {
	t.Helper()
	if err := m.sh.Do(func(*shard.Shard) { fn() }); err != nil {
		t.Fatal(err)
	}
}

// send is every replica's Config.Send: it runs on the sender's shard.
func (tg *testGroup) send(r *Replica, msgs []raftlite.Message) {
	for _, m := range msgs {
		m.Entries = append([]raftlite.Entry(nil), m.Entries...)
		if !fillData(r, &m) {
			continue // not written yet: consensus sends it again
		}
		tg.mu.Lock()
		drop := tg.drop
		tg.mu.Unlock()
		if drop != nil && drop(r.cfg.Self, m) {
			continue
		}
		to := tg.member(m.To)
		if to == nil {
			continue // that node is down
		}
		_ = to.sh.Post(func() {
			if to.r != nil && !to.r.closed {
				_ = to.r.Step(m)
			}
		})
	}
}

// fillData gives m's entries their bytes: copies of what the leader
// proposed, or the batches read from its log. It reports false when the
// log has not written them yet.
func fillData(r *Replica, m *raftlite.Message) bool {
	var need []int
	for i := range m.Entries {
		if m.Entries[i].Data == nil {
			need = append(need, i)
		} else {
			m.Entries[i].Data = append([]byte(nil), m.Entries[i].Data...)
		}
	}
	if len(need) == 0 {
		return true
	}
	first, last := m.Entries[need[0]].Base, m.Entries[need[len(need)-1]].Last
	if last > r.log.WrittenOffset() {
		return false
	}
	spans, err := r.log.Read(first, 64<<20, last)
	if err != nil {
		return false
	}
	var data []byte
	at := int64(-1) // the raft offset of data's first batch
	for _, sp := range spans {
		if at < 0 {
			at = sp.FirstOffset
		}
		if data, err = sp.AppendTo(data); err != nil {
			return false
		}
	}
	segment.ReleaseSpans(spans)
	for _, i := range need {
		e := &m.Entries[i]
		for len(data) >= batch.HeaderSize {
			h, err := batch.ReadHeader(data)
			if err != nil || h.Size() > len(data) {
				return false
			}
			b := data[:h.Size()]
			data = data[h.Size():]
			base := at
			at += h.RaftWidth()
			if base == e.Base {
				e.Data, e.Bytes = b, int32(len(b))
				break
			}
		}
		if e.Data == nil {
			return false
		}
	}
	return true
}

// primary waits for a member that leads and accepts writes.
func (tg *testGroup) primary() *testMember {
	tg.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, id := range tg.ids() {
			m := tg.member(id)
			if m == nil {
				continue
			}
			var ok bool
			m.do(tg.t, func() { ok = m.r.IsPrimary() && m.r.CommitEnd() >= m.r.log.LogEndOffset() })
			if ok {
				return m
			}
		}
		time.Sleep(time.Millisecond)
	}
	tg.t.Fatal("no primary within 10 s")
	return nil
}

// change runs fn (AddLearner, Promote, RemoveMember) on the primary and
// waits for its answer.
func (tg *testGroup) change(m *testMember, fn func(r *Replica, reply func(ConfChangeResult))) ConfChangeResult {
	tg.t.Helper()
	out := make(chan ConfChangeResult, 1)
	m.do(tg.t, func() { fn(m.r, func(res ConfChangeResult) { out <- res }) })
	select {
	case res := <-out:
		return res
	case <-time.After(10 * time.Second):
		tg.t.Fatal("membership change not answered within 10 s")
	}
	return ConfChangeResult{}
}

// waitFor polls cond on member m's shard until it holds.
func (tg *testGroup) waitFor(m *testMember, what string, cond func(r *Replica) bool) {
	tg.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var ok bool
		m.do(tg.t, func() { ok = cond(m.r) })
		if ok {
			return
		}
		if time.Now().After(deadline) {
			tg.t.Fatalf("node %d: %s: not within 10 s", m.id, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// producer writes one-record batches "v<i>" through whichever member is
// primary until stopped, and records the acknowledged ones by offset.
type producer struct {
	tg    *testGroup
	stop  chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	acked map[int64]string
}

func (tg *testGroup) startProducer() *producer {
	p := &producer{tg: tg, stop: make(chan struct{}), done: make(chan struct{}), acked: map[int64]string{}}
	go func() {
		defer close(p.done)
		for i := 0; ; i++ {
			select {
			case <-p.stop:
				return
			default:
			}
			v := fmt.Sprintf("v%d", i)
			b := mkBatchValue(tg.t, v)
			for _, id := range tg.ids() {
				m := tg.member(id)
				if m == nil {
					continue
				}
				out := make(chan ProduceResult, 1)
				err := m.sh.Post(func() {
					m.r.Produce(&ProduceArgs{Generation: GenerationUnknown, Records: b, Timeout: 5 * time.Second},
						func(res ProduceResult) { out <- res })
				})
				if err != nil {
					continue
				}
				if res := <-out; res.Err == nil {
					p.mu.Lock()
					p.acked[res.Produced.BaseOffset] = v
					p.mu.Unlock()
					break
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return p
}

func (p *producer) finish() map[int64]string {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.acked
}

func (p *producer) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked)
}

func mkBatchValue(t *testing.T, v string) []byte {
	b, err := batch.NewBuilder(batch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.AppendKV(1000, nil, []byte(v)); err != nil {
		t.Fatal(err)
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// committed reads member m's log up to its high watermark: values by
// offset (control batches skipped).
func (tg *testGroup) committed(m *testMember) map[int64]string {
	tg.t.Helper()
	out := map[int64]string{}
	m.do(tg.t, func() {
		end := min(m.r.CommitEnd()-1, m.r.log.WrittenOffset())
		for off := m.r.log.LogStartOffset(); off <= end; {
			spans, err := m.r.log.Read(off, 1<<20, end)
			if err != nil || len(spans) == 0 {
				tg.t.Errorf("node %d: read at %d: %v", m.id, off, err)
				return
			}
			var data []byte
			for _, sp := range spans {
				data, _ = sp.AppendTo(data)
				off = sp.LastOffset + 1
			}
			segment.ReleaseSpans(spans)
			var it batch.Records
			for len(data) >= batch.HeaderSize {
				h, err := batch.ReadHeader(data)
				if err != nil || h.Size() > len(data) {
					break
				}
				b := data[:h.Size()]
				data = data[h.Size():]
				if h.IsControl() {
					continue
				}
				if err := it.Reset(b); err != nil {
					tg.t.Errorf("node %d: batch at %d: %v", m.id, h.BaseOffset, err)
					return
				}
				for it.Next() {
					out[it.Record().Offset] = string(it.Record().Value)
				}
			}
		}
	})
	return out
}
