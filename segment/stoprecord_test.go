package segment

import (
	"bytes"
	"errors"
	"io/fs"
	"path"
	"syscall"
	"testing"

	"github.com/corestream/corestream/segment/vfs"
)

// stopLogs are the logs of one test node: one whose active segment is
// large enough for index files, one with a few small batches, one empty.
var stopLogs = []struct {
	name    string
	batches int
}{{"large", 400}, {"small", 3}, {"empty", 0}}

// fillStopLogs opens and fills the logs under dir/partitions.
func fillStopLogs(t *testing.T, fsys vfs.FS, dir string, cfg Config, newEngine func() Engine) ([]*Log, []map[int64][]byte) {
	t.Helper()
	var logs []*Log
	var want []map[int64][]byte
	for _, sl := range stopLogs {
		l := openLog(t, fsys, path.Join(dir, "partitions", sl.name), cfg, newEngine())
		w := map[int64][]byte{}
		if sl.batches > 0 {
			w = fill(t, l, sl.batches, func(i int) int32 { return int32(1 + i/150) }, constTs(1))
		}
		logs, want = append(logs, l), append(want, w)
	}
	return logs, want
}

func TestStopRecordOpensEveryLogClean(t *testing.T) {
	forEach(t, func(t *testing.T, fsys vfs.FS, dir string, newEngine func() Engine) {
		cfg := Config{Fsync: FsyncNever}
		logs, want := fillStopLogs(t, fsys, dir, cfg, newEngine)
		epochs := logs[0].Epochs()
		rec := closeAllInto(t, dir, logs)
		if rec.Len() != len(logs) {
			t.Fatalf("record holds %d logs, want %d", rec.Len(), len(logs))
		}
		if err := rec.Commit(fsys); err != nil {
			t.Fatal(err)
		}
		for i, sl := range stopLogs {
			d := logs[i].Dir()
			if _, err := fsys.Stat(path.Join(d, cleanFile)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("%s: a log's own clean record was written: %v", sl.name, err)
			}
			_, err := fsys.Stat(path.Join(d, segName(0, indexSuffix)))
			if large := sl.name == "large"; large != (err == nil) {
				t.Fatalf("%s: index file present = %v", sl.name, err == nil)
			}
		}

		cfg.Stopped = loadStop(t, fsys, dir)
		if _, err := fsys.Stat(path.Join(dir, stopFile)); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("the record outlived the start that read it: %v", err)
		}
		for i, sl := range stopLogs {
			l := openLog(t, fsys, logs[i].Dir(), cfg, newEngine())
			r := l.Recovery()
			if !r.Clean || r.ScannedBytes != 0 || r.IndexesRebuilt != 0 || r.EpochsRebuilt || r.EpochsRepaired {
				t.Fatalf("%s: reopen after the stop: %v", sl.name, r)
			}
			mustHave(t, l, want[i])
			if sl.name == "large" && len(l.Epochs()) != len(epochs) {
				t.Fatalf("epochs %v, want %v", l.Epochs(), epochs)
			}
			// The log goes on, and its next clean close is its own.
			fill(t, l, 2, constEpoch(9), constTs(2))
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
		}
		// An entry is trusted once: the next start of the same logs relies
		// on their own records, and a second load finds no record.
		cfg.Stopped = loadStop(t, fsys, dir)
		if cfg.Stopped.Len() != 0 {
			t.Fatalf("a second load found %d entries", cfg.Stopped.Len())
		}
		for i := range stopLogs {
			l := openLog(t, fsys, logs[i].Dir(), cfg, newEngine())
			if !l.Recovery().Clean {
				t.Fatalf("%s: %v", stopLogs[i].name, l.Recovery())
			}
			l.Close()
		}
	})
}

// closeAllInto closes logs into a new record for dir, as a node's stop
// does before its Commit.
func closeAllInto(t *testing.T, dir string, logs []*Log) *StopRecord {
	t.Helper()
	rec := NewStopRecord(dir)
	for _, l := range logs {
		if err := l.CloseInto(rec); err != nil {
			t.Fatal(err)
		}
	}
	return rec
}

func loadStop(t *testing.T, fsys vfs.FS, dir string) *StopRecord {
	t.Helper()
	rec, err := LoadStopRecord(fsys, dir)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// Until Commit returns, nothing a CloseInto wrote is trusted: a crash
// before it leaves logs that are scanned, and every synced batch is there.
func TestStopRecordCrashBeforeCommit(t *testing.T) {
	for seed := uint64(0); seed < 20; seed++ {
		fsys := vfs.NewMem()
		cfg := Config{Fsync: FsyncAlways}
		eng := func() Engine { return NewPwriteEngine() }
		logs, want := fillStopLogs(t, fsys, "/n", cfg, eng)
		closeAllInto(t, "/n", logs)
		fsys.Crash(seed)
		cfg.Stopped = loadStop(t, fsys, "/n")
		for i, sl := range stopLogs {
			l := openLog(t, fsys, logs[i].Dir(), cfg, eng())
			if l.Recovery().Clean && sl.batches > 0 {
				t.Fatalf("seed %d, %s: clean without a committed record: %v", seed, sl.name, l.Recovery())
			}
			mustHave(t, l, want[i])
			l.Close()
		}
	}
}

func TestStopRecordFailedSyncRecordsNothing(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := Config{Fsync: FsyncNever}
	eng := func() Engine { return NewPwriteEngine() }
	logs, want := fillStopLogs(t, fsys, "/n", cfg, eng)
	rec := closeAllInto(t, "/n", logs)
	fsys.SetInjector(func(op vfs.Op, _ string) error {
		if op == vfs.OpSyncFS {
			return syscall.EIO
		}
		return nil
	})
	if err := rec.Commit(fsys); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Commit with a failing syncfs: %v", err)
	}
	fsys.SetInjector(nil)
	if _, err := fsys.Stat("/n/" + stopFile); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a record was written after the sync failed: %v", err)
	}
	cfg.Stopped = loadStop(t, fsys, "/n")
	l := openLog(t, fsys, logs[0].Dir(), cfg, eng())
	defer l.Close()
	if l.Recovery().Clean {
		t.Fatalf("clean after a failed commit: %v", l.Recovery())
	}
	mustHave(t, l, want[0])
}

// A log's own clean record beside an entry of the node's record: one of
// them is stale, so neither is trusted.
func TestStopRecordAndOwnRecordScan(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := Config{}
	l := openLog(t, fsys, "/n/p", cfg, NewPwriteEngine())
	want := fill(t, l, 5, constEpoch(1), constTs(1))
	rec := NewStopRecord("/n")
	if err := l.CloseInto(rec); err != nil {
		t.Fatal(err)
	}
	if err := rec.Commit(fsys); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, fsys, "/n/p", cfg, NewPwriteEngine()) // no Stopped: scans, then
	if err := l.Close(); err != nil {                    // writes its own record
		t.Fatal(err)
	}
	cfg.Stopped = loadStop(t, fsys, "/n")
	if cfg.Stopped.Len() != 1 {
		t.Fatalf("record entries: %d", cfg.Stopped.Len())
	}
	l = openLog(t, fsys, "/n/p", cfg, NewPwriteEngine())
	defer l.Close()
	if l.Recovery().Clean {
		t.Fatalf("trusted one of two records: %v", l.Recovery())
	}
	mustHave(t, l, want)
}

func TestStopRecordDamagedIsDropped(t *testing.T) {
	fsys := vfs.NewMem()
	fsys.MkdirAll("/n", 0o755)
	f, _ := fsys.Create("/n/" + stopFile)
	f.WriteAt([]byte("not a checkpoint"), 0)
	f.Sync()
	f.Close()
	rec := loadStop(t, fsys, "/n")
	if rec.Len() != 0 {
		t.Fatalf("entries from a damaged record: %d", rec.Len())
	}
	if _, err := fsys.Stat("/n/" + stopFile); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("damaged record left: %v", err)
	}
}

func TestStopRecordRefusesLogOutsideItsDirectory(t *testing.T) {
	fsys := vfs.NewMem()
	l := openLog(t, fsys, "/elsewhere/p", Config{}, NewPwriteEngine())
	fill(t, l, 1, constEpoch(1), constTs(1))
	rec := NewStopRecord("/n")
	fsys.MkdirAll("/n", 0o755)
	if err := l.CloseInto(rec); err != nil {
		t.Fatal(err)
	}
	if err := rec.Commit(fsys); err == nil {
		t.Fatal("Commit recorded a log outside the record's directory")
	}
}

// Discard (a deleted partition) syncs and writes nothing: no file appears,
// and the next open finds no clean record and scans.
func TestDiscardWritesNothing(t *testing.T) {
	fsys := vfs.NewMem()
	cfg := Config{Fsync: FsyncNever}
	l := openLog(t, fsys, "/d", cfg, NewPwriteEngine())
	durable := fill(t, l, 3, constEpoch(1), constTs(1)) // fill syncs
	rng := newRNG(3)
	if _, _, err := l.AppendLeader(makeBatch(rng, 1, 100, 1), 2); err != nil {
		t.Fatal(err)
	}
	mustFlush(t, l)
	before, _ := fsys.List("/d")
	if err := l.Discard(); err != nil {
		t.Fatal(err)
	}
	if err := l.Discard(); !errors.Is(err, ErrClosed) {
		t.Fatalf("second Discard: %v", err)
	}
	if after, _ := fsys.List("/d"); len(after) != len(before) {
		t.Fatalf("files %v after Discard, %v before", after, before)
	}
	fsys.Crash(1)
	l = openLog(t, fsys, "/d", cfg, NewPwriteEngine())
	defer l.Close()
	if l.Recovery().Clean {
		t.Fatalf("clean after Discard: %v", l.Recovery())
	}
	got := readAll(t, l) // the unsynced batch may survive the crash or not
	for off, b := range durable {
		if !bytes.Equal(got[off], b) {
			t.Fatalf("synced batch at %d lost", off)
		}
	}
}
