package segment

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/corestream/corestream/netio/uring"
	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/segment/vfs"
)

// engineFactory builds an engine for the log tests. needsFd: the engine
// only works on files with a descriptor (run on the OS file system only).
type engineFactory struct {
	name    string
	new     func(t *testing.T) Engine
	needsFd bool
}

// testEngines are the engines every log test runs against. Another engine
// (io_uring) joins by appending to this list from an init function in a
// _test.go file of this package.
var testEngines = []engineFactory{
	{name: "pwrite", new: func(*testing.T) Engine { return NewPwriteEngine() }},
	{name: "reorder", new: func(*testing.T) Engine { return newReorderEngine(1) }},
	{name: "io_uring", needsFd: true, new: func(t *testing.T) Engine {
		e, err := uring.NewEngine(uring.Options{})
		if errors.Is(err, uring.ErrUnavailable) {
			t.Skip(err)
		}
		if err != nil {
			t.Fatal(err)
		}
		return e
	}},
}

// fsKind is a file system to run a test on.
type fsKind struct {
	name string
	new  func(t *testing.T) (vfs.FS, string)
}

var testFSes = []fsKind{
	{"mem", func(*testing.T) (vfs.FS, string) { return vfs.NewMem(), "/data/topic-0" }},
	{"os", func(t *testing.T) (vfs.FS, string) { return vfs.OS(), t.TempDir() + "/topic-0" }},
}

// forEach runs fn for every (file system, engine) pair that works.
func forEach(t *testing.T, fn func(t *testing.T, fsys vfs.FS, dir string, newEngine func() Engine)) {
	for _, fk := range testFSes {
		for _, ef := range testEngines {
			if ef.needsFd && fk.name != "os" {
				continue
			}
			t.Run(fk.name+"/"+ef.name, func(t *testing.T) {
				fsys, dir := fk.new(t)
				fn(t, fsys, dir, func() Engine { return ef.new(t) })
			})
		}
	}
}

// makeBatch builds a valid batch of records records with payload bytes of
// seeded noise after the header, every timestamp ts.
func makeBatch(rng *rand.Rand, records, payload int, ts int64) []byte {
	b := make([]byte, batch.HeaderSize+payload)
	be := binary.BigEndian
	be.PutUint32(b[8:], uint32(len(b)-batch.LengthFieldEnd))
	be.PutUint32(b[12:], 0xffffffff)
	b[16] = batch.Magic
	be.PutUint32(b[23:], uint32(records-1))
	be.PutUint64(b[27:], uint64(ts))
	be.PutUint64(b[35:], uint64(ts))
	be.PutUint64(b[43:], ^uint64(0))
	be.PutUint16(b[51:], 0xffff)
	be.PutUint32(b[53:], 0xffffffff)
	be.PutUint32(b[57:], uint32(records))
	for i := batch.HeaderSize; i < len(b); i++ {
		b[i] = byte(rng.Uint32())
	}
	be.PutUint32(b[17:], batch.Checksum(b))
	return b
}

// stamped returns b as the log stores it after a leader append.
func stamped(b []byte, base int64, epoch int32) []byte {
	c := bytes.Clone(b)
	batch.SetBaseOffset(c, base)
	batch.SetPartitionLeaderEpoch(c, epoch)
	return c
}

func newRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 42)) }

// openLog opens a log with a private IO on engine e.
func openLog(t *testing.T, fsys vfs.FS, dir string, cfg Config, e Engine) *Log {
	t.Helper()
	l, err := OpenLog(fsys, dir, cfg, NewIO(e))
	if err != nil {
		t.Fatalf("OpenLog: %v", err)
	}
	l.ownIO = true
	return l
}

// readAll reads the log from its start up to its written offset and
// returns the batches' bytes by base offset.
func readAll(t *testing.T, l *Log) map[int64][]byte {
	t.Helper()
	out := map[int64][]byte{}
	for off := l.LogStartOffset(); off <= l.WrittenOffset(); {
		spans, err := l.Read(off, 1<<20, l.WrittenOffset())
		if err != nil {
			t.Fatalf("Read(%d): %v", off, err)
		}
		if len(spans) == 0 {
			t.Fatalf("Read(%d) returned nothing below the written offset %d", off, l.WrittenOffset())
		}
		for _, sp := range spans {
			b, err := sp.AppendTo(nil)
			if err != nil {
				t.Fatal(err)
			}
			for len(b) > 0 {
				h, err := batch.Validate(b[:min(len(b), int(batch.LengthFieldEnd+int(binary.BigEndian.Uint32(b[8:]))))])
				if err != nil {
					t.Fatalf("batch read back at %d: %v", off, err)
				}
				if want := l.UserOffset(off); h.BaseOffset != want {
					t.Fatalf("batch read back at raft offset %d has base %d, want %d", off, h.BaseOffset, want)
				}
				out[off] = b[:h.Size()]
				off += rwidth(&h)
				b = b[h.Size():]
			}
		}
		ReleaseSpans(spans)
	}
	return out
}

// mustHave checks that l reads back exactly the batches of want (by base
// offset).
func mustHave(t *testing.T, l *Log, want map[int64][]byte) {
	t.Helper()
	got := readAll(t, l)
	if len(got) != len(want) {
		t.Fatalf("the log reads back %d batches, want %d", len(got), len(want))
	}
	for off, b := range want {
		if !bytes.Equal(got[off], b) {
			t.Fatalf("batch at %d differs", off)
		}
	}
}

// mustFlush flushes the log's IO and waits for everything in flight.
func mustFlush(t *testing.T, l *Log) {
	t.Helper()
	if err := l.io.Flush(); err != nil {
		t.Fatal(err)
	}
	for l.io.InFlight() > 0 {
		if _, err := l.io.Wait(); err != nil {
			t.Fatal(err)
		}
	}
}

// reorderEngine performs operations in a random order at Submit (a write
// and its sync stay together) and reports completions in a random order,
// some of them only on a later Reap: the adversary of the watermark logic.
type reorderEngine struct {
	inner *pwriteEngine
	rng   *rand.Rand
	held  []pwriteDone
}

func newReorderEngine(seed uint64) *reorderEngine {
	return &reorderEngine{inner: &pwriteEngine{}, rng: newRNG(seed)}
}

func (e *reorderEngine) Name() string { return "reorder" }
func (e *reorderEngine) Write(f vfs.File, buf []byte, off int64, sync bool, token uint64) error {
	return e.inner.Write(f, buf, off, sync, token)
}
func (e *reorderEngine) Sync(f vfs.File, token uint64) error { return e.inner.Sync(f, token) }
func (e *reorderEngine) Submit() error {
	q := e.inner.queue
	e.rng.Shuffle(len(q), func(i, j int) { q[i], q[j] = q[j], q[i] })
	return e.inner.Submit()
}
func (e *reorderEngine) Reap(wait bool, fn func(uint64, error)) (int, error) {
	if wait && len(e.held) == 0 && len(e.inner.done) == 0 && len(e.inner.queue) > 0 {
		e.Submit()
	}
	e.held = append(e.held, e.inner.done...)
	e.inner.done = e.inner.done[:0]
	e.rng.Shuffle(len(e.held), func(i, j int) { e.held[i], e.held[j] = e.held[j], e.held[i] })
	n := len(e.held)
	if n > 1 {
		n = 1 + e.rng.IntN(n) // hold some back for later
	}
	out := append([]pwriteDone(nil), e.held[:n]...)
	e.held = append(e.held[:0], e.held[n:]...)
	for _, d := range out {
		e.inner.inFlight--
		fn(d.token, d.err)
	}
	return len(out), nil
}
func (e *reorderEngine) InFlight() int { return e.inner.inFlight }
func (e *reorderEngine) WakeFd() int   { return -1 }
func (e *reorderEngine) Close() error  { return e.inner.Close() }

func readHeaderBytes(b []byte) (batch.Header, error) { return batch.ReadHeader(b) }

// osEngine is the engine a node picks for the OS's file system: io_uring,
// or pwrite (with the reason) where the kernel refuses it.
func osEngine() (Engine, error) {
	u, err := uring.ForFS(vfs.OS())
	if err != nil {
		return NewPwriteEngine(), err
	}
	return u, nil
}
