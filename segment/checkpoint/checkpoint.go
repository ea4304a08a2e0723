// Package checkpoint writes and reads small state files atomically: the
// file is written whole under a temporary name, synced, renamed over the
// old one, and the directory is synced, so after a crash the file holds
// either the old state or the new one, never a mix. Every file carries a
// kind tag, a payload version and a CRC-32C, and Read refuses anything that
// does not check out.
//
// The log keeps its log start offset, its leader-epoch cache and its
// clean-shutdown record in checkpoints; the broker reuses the package for
// the consensus term/vote file and consumer offsets.
//
// Layout (big-endian; never changes):
//
//	 0  magic     [4]byte  "CSCK"
//	 4  format    uint16   = 1, this layout
//	 6  version   uint16   the payload's version, chosen by the caller
//	 8  kind      [4]byte  what the payload is, chosen by the caller
//	12  length    uint32   payload bytes, at most PayloadBytesMax
//	16  payload   [length]byte
//	..  crc       uint32   CRC-32C (Castagnoli) of every byte before it
package checkpoint

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"path"

	"github.com/corestream/corestream/segment/vfs"
)

// Kind tags what a checkpoint holds, as four ASCII bytes (e.g. "LSO1").
type Kind [4]byte

// String returns the kind as text.
func (k Kind) String() string { return string(k[:]) }

// Format constants. Never change: they are the format.
const (
	magic        = "CSCK"
	format       = 1
	headerSize   = 16
	trailerSize  = 4
	offFormat    = 4
	offVersion   = 6
	offKind      = 8
	offLength    = 12
	tmpSuffix    = ".tmp"
	OverheadSize = headerSize + trailerSize // bytes a checkpoint adds to its payload

	// PayloadBytesMax bounds a payload (16 MiB); a larger length field is
	// corruption, never an allocation request.
	PayloadBytesMax = 16 << 20
)

// Errors returned by Read and Decode. Callers use errors.Is.
var (
	// ErrCorrupt is returned when the file is short, has a bad magic,
	// format or length, or its checksum does not match.
	ErrCorrupt = errors.New("checkpoint: corrupt")
	// ErrKind is returned when the file is a valid checkpoint of another
	// kind than the one asked for.
	ErrKind = errors.New("checkpoint: wrong kind")
	// ErrTooLarge is returned by Write and Encode for a payload over
	// PayloadBytesMax.
	ErrTooLarge = errors.New("checkpoint: payload too large")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Encode returns the bytes of a checkpoint holding payload.
func Encode(kind Kind, version uint16, payload []byte) ([]byte, error) {
	if len(payload) > PayloadBytesMax {
		return nil, fmt.Errorf("%w: %d bytes", ErrTooLarge, len(payload))
	}
	b := make([]byte, headerSize+len(payload)+trailerSize)
	copy(b, magic)
	be := binary.BigEndian
	be.PutUint16(b[offFormat:], format)
	be.PutUint16(b[offVersion:], version)
	copy(b[offKind:], kind[:])
	be.PutUint32(b[offLength:], uint32(len(payload)))
	copy(b[headerSize:], payload)
	n := headerSize + len(payload)
	be.PutUint32(b[n:], crc32.Checksum(b[:n], castagnoli))
	return b, nil
}

// Decode checks b and returns its payload version and payload (a sub-slice
// of b). It returns ErrCorrupt or ErrKind, wrapped with the detail.
func Decode(b []byte, kind Kind) (version uint16, payload []byte, err error) {
	if len(b) < headerSize+trailerSize {
		return 0, nil, fmt.Errorf("%w: %d bytes", ErrCorrupt, len(b))
	}
	be := binary.BigEndian
	if string(b[:4]) != magic {
		return 0, nil, fmt.Errorf("%w: bad magic %q", ErrCorrupt, b[:4])
	}
	if f := be.Uint16(b[offFormat:]); f != format {
		return 0, nil, fmt.Errorf("%w: format %d", ErrCorrupt, f)
	}
	n := be.Uint32(b[offLength:])
	if n > PayloadBytesMax || int(n) != len(b)-headerSize-trailerSize {
		return 0, nil, fmt.Errorf("%w: payload length %d in %d bytes", ErrCorrupt, n, len(b))
	}
	end := headerSize + int(n)
	if got, want := crc32.Checksum(b[:end], castagnoli), be.Uint32(b[end:]); got != want {
		return 0, nil, fmt.Errorf("%w: checksum %08x, stored %08x", ErrCorrupt, got, want)
	}
	if k := Kind(b[offKind : offKind+4]); k != kind {
		return 0, nil, fmt.Errorf("%w: %q, want %q", ErrKind, k.String(), kind.String())
	}
	return be.Uint16(b[offVersion:]), b[headerSize:end], nil
}

// Write replaces the checkpoint at name atomically and durably: temp file,
// write, sync, rename, directory sync. A failure leaves the old checkpoint
// in place (a stray temp file may remain; Write and Read ignore it).
func Write(fsys vfs.FS, name string, kind Kind, version uint16, payload []byte) error {
	b, err := Encode(kind, version, payload)
	if err != nil {
		return err
	}
	tmp := name + tmpSuffix
	f, err := fsys.Create(tmp)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	_, err = f.WriteAt(b, 0)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, name)
	}
	if err != nil {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("checkpoint: write %s: %w", name, err)
	}
	if err := fsys.SyncDir(path.Dir(name)); err != nil {
		return fmt.Errorf("checkpoint: write %s: %w", name, err)
	}
	return nil
}

// Read returns the payload version and payload of the checkpoint at name.
// A missing file returns an error wrapping fs.ErrNotExist; a damaged one
// ErrCorrupt; one of another kind ErrKind.
func Read(fsys vfs.FS, name string, kind Kind) (version uint16, payload []byte, err error) {
	f, err := fsys.Open(name)
	if err != nil {
		return 0, nil, fmt.Errorf("checkpoint: %w", err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return 0, nil, fmt.Errorf("checkpoint: %w", err)
	}
	if size > PayloadBytesMax+OverheadSize {
		return 0, nil, fmt.Errorf("%w: %s is %d bytes", ErrCorrupt, name, size)
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil {
		return 0, nil, fmt.Errorf("checkpoint: read %s: %w", name, err)
	}
	version, payload, err = Decode(b, kind)
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %w", name, err)
	}
	return version, payload, nil
}

// IsTemp reports whether a directory entry is a checkpoint's temporary file
// (left behind by a crash during Write); owners of a directory remove them.
func IsTemp(name string) bool {
	return len(name) > len(tmpSuffix) && name[len(name)-len(tmpSuffix):] == tmpSuffix
}
