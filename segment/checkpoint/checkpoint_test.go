package checkpoint

import (
	"bytes"
	"errors"
	"io/fs"
	"syscall"
	"testing"

	"github.com/corestream/corestream/segment/vfs"
)

var kindTest = Kind{'T', 'E', 'S', 'T'}

func TestRoundTrip(t *testing.T) {
	for _, fsys := range []vfs.FS{vfs.NewMem(), vfs.OS()} {
		dir := t.TempDir()
		if _, ok := fsys.(*vfs.MemFS); ok {
			dir = "/d"
		}
		fsys.MkdirAll(dir, 0o755)
		name := dir + "/state.checkpoint"
		if _, _, err := Read(fsys, name, kindTest); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("missing: %v", err)
		}
		for i, p := range [][]byte{nil, []byte("one"), bytes.Repeat([]byte{7}, 1000)} {
			if err := Write(fsys, name, kindTest, uint16(i), p); err != nil {
				t.Fatal(err)
			}
			v, got, err := Read(fsys, name, kindTest)
			if err != nil || v != uint16(i) || !bytes.Equal(got, p) {
				t.Fatalf("Read = %d %q %v", v, got, err)
			}
		}
		if _, _, err := Read(fsys, name, Kind{'O', 'T', 'H', 'R'}); !errors.Is(err, ErrKind) {
			t.Fatalf("wrong kind: %v", err)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	good, _ := Encode(kindTest, 3, []byte("payload"))
	cases := map[string][]byte{
		"empty":     {},
		"short":     good[:10],
		"truncated": good[:len(good)-1],
		"trailing":  append(bytes.Clone(good), 0),
	}
	for i := range good {
		b := bytes.Clone(good)
		b[i] ^= 0x40
		cases["flip"+string(rune('A'+i%26))+string(rune('0'+i/26))] = b
	}
	for name, b := range cases {
		if _, _, err := Decode(b, kindTest); !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrKind) {
			t.Errorf("%s: Decode accepted damaged input (err %v)", name, err)
		}
	}
	if _, err := Encode(kindTest, 0, make([]byte, PayloadBytesMax+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized payload: %v", err)
	}
}

// TestCrashAtomic: whatever the crash keeps, Read sees the old or the new
// state, never a mix and never nothing once one Write has returned.
func TestCrashAtomic(t *testing.T) {
	for seed := uint64(0); seed < 300; seed++ {
		m := vfs.NewMem()
		m.MkdirAll("/d", 0o755)
		if err := Write(m, "/d/c", kindTest, 1, []byte("old")); err != nil {
			t.Fatal(err)
		}
		// Fail one operation of the second write at a seed-chosen point,
		// then crash.
		failAt, n := int(seed%7), 0
		m.SetInjector(func(op vfs.Op, _ string) error {
			n++
			if n > failAt {
				return syscall.EIO
			}
			return nil
		})
		err := Write(m, "/d/c", kindTest, 2, []byte("new state"))
		m.Crash(seed)
		v, p, rerr := Read(m, "/d/c", kindTest)
		if rerr != nil {
			t.Fatalf("seed %d: Read after crash: %v", seed, rerr)
		}
		switch {
		case v == 1 && string(p) == "old":
		case v == 2 && string(p) == "new state":
		default:
			t.Fatalf("seed %d: mixed state %d %q", seed, v, p)
		}
		if err == nil && v != 2 {
			t.Fatalf("seed %d: Write returned nil but the crash lost it", seed)
		}
	}
}

func FuzzDecode(f *testing.F) {
	good, _ := Encode(kindTest, 1, []byte("payload"))
	max := make([]byte, 0, 64<<10)
	max = append(max, good[:headerSize]...)
	max = append(max, make([]byte, 60<<10)...)
	f.Add([]byte{})
	f.Add(good)
	f.Add(max)
	f.Add(append(bytes.Clone(good), "garbage"...))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, p, err := Decode(b, kindTest)
		if err != nil {
			return
		}
		again, err := Encode(kindTest, v, p)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("accepted input does not re-encode to itself")
		}
	})
}
