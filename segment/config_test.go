package segment

import (
	"errors"
	"testing"

	"github.com/corestream/corestream/segment/vfs"
)

func TestConfig(t *testing.T) {
	for _, name := range []string{"always", "interval", "messages", "never"} {
		p, err := ParseFsyncPolicy(name)
		if err != nil || p.String() != name {
			t.Errorf("ParseFsyncPolicy(%q) = %v, %v", name, p, err)
		}
	}
	if _, err := ParseFsyncPolicy("sometimes"); !errors.Is(err, ErrConfig) {
		t.Errorf("unknown policy: %v", err)
	}
	for _, name := range []string{"auto", "zero-fill", "keep-size"} {
		if m, err := ParsePreallocMode(name); err != nil || m.String() != name {
			t.Errorf("ParsePreallocMode(%q) = %v, %v", name, m, err)
		}
	}
	c, err := Config{}.withDefaults()
	if err != nil || c.Preallocate != PreallocKeepSize || c.SegmentBytes != SegmentBytesDefault {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	for name, bad := range map[string]Config{
		"tiny segment":      {SegmentBytes: 10},
		"huge segment":      {SegmentBytes: 1 << 40},
		"huge batch":        {BatchBytesMax: 1 << 30},
		"small buffer":      {WriteBufferBytes: 100},
		"no chains":         {ChainsInFlight: -1},
		"bad policy":        {Fsync: 9},
		"bad prealloc mode": {Preallocate: 9},
		"negative interval": {FsyncIntervalMs: -5},
	} {
		if _, err := OpenLog(vfs.NewMem(), "/d", bad, nil); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestRollByAge(t *testing.T) {
	now := int64(0)
	l := openLog(t, vfs.NewMem(), "/d", Config{SegmentMs: 1000, NowMs: func() int64 { return now }}, NewPwriteEngine())
	defer l.Close()
	fill(t, l, 3, constEpoch(1), constTs(1))
	now += 999
	fill(t, l, 1, constEpoch(1), constTs(1))
	if l.SegmentCount() != 1 {
		t.Fatalf("rolled early: %d segments", l.SegmentCount())
	}
	now++
	fill(t, l, 1, constEpoch(1), constTs(1))
	if l.SegmentCount() != 2 || l.segs[1].base != 8 {
		t.Fatalf("after a second: %d segments", l.SegmentCount())
	}
	// An empty active segment never rolls, however old.
	if err := l.TruncateTo(8); err != nil {
		t.Fatal(err)
	}
	now += 5000
	if err := l.maybeRoll(100, 0); err != nil || l.SegmentCount() != 2 {
		t.Fatal("an empty segment rolled")
	}
}
