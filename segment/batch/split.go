package batch

import (
	"encoding/binary"
	"fmt"
)

// Cut splits the first batch off b, a byte slice that holds concatenated
// batches (a fetch response's records, or a read of the log). It returns
// the batch, capacity-limited so that appending to it cannot overwrite the
// next one, and the bytes after it.
//
// When b ends inside its first batch (a consumer's fetch cut by max bytes,
// or an empty b), Cut returns a nil batch, rest == b and no error: a clean
// stop, not a failure. It returns an error wrapping ErrCorrupt when the
// header that is there cannot start a batch (length out of range or wrong
// magic), since nothing after it can be found. Cut checks no CRC: run
// Validate or Records on the batch.
func Cut(b []byte) (batch, rest []byte, err error) {
	if len(b) < LengthFieldEnd {
		return nil, b, nil
	}
	length := int32(binary.BigEndian.Uint32(b[offBatchLength:]))
	if length < HeaderSize-LengthFieldEnd || int(length) > BatchBytesMax-LengthFieldEnd {
		return nil, b, fmt.Errorf("%w: batch length %d out of range", ErrCorrupt, length)
	}
	if len(b) > offMagic && int8(b[offMagic]) != Magic {
		return nil, b, fmt.Errorf("%w: magic %d, want %d", ErrCorrupt, int8(b[offMagic]), Magic)
	}
	size := LengthFieldEnd + int(length)
	if len(b) < size {
		return nil, b, nil
	}
	return b[:size:size], b[size:], nil
}

// Split appends to dst every whole batch at the start of b, in order, and
// returns them with the partial tail that follows (empty when b ends on a
// batch boundary). It stops with an error wrapping ErrCorrupt where Cut
// does, returning the batches before that point and the rest of b from it.
func Split(dst [][]byte, b []byte) (batches [][]byte, tail []byte, err error) {
	for { // bounded: every turn consumes at least HeaderSize bytes of b
		bt, rest, err := Cut(b)
		if err != nil || bt == nil {
			return dst, rest, err
		}
		dst = append(dst, bt)
		b = rest
	}
}
