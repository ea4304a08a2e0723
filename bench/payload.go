package bench

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
)

// The message header, at the start of every value (never change the
// layout: reports of earlier runs name it). Big-endian:
//
//	+--------------------+--------------+--------------------+
//	| sent ns (int64, 8) | producer (2) | sequence (uint48)  |
//	+--------------------+--------------+--------------------+
//	0                    8              10                   16
//
// sent ns is the intended send time in nanoseconds since the run's start
// (monotonic clock of the process that runs producers and consumers).
const (
	headerBytes = 16
	seqMax      = 1<<48 - 1
)

// errShortPayload is returned by decodeHeader for a value shorter than
// the header: a message this run did not write.
var errShortPayload = errors.New("bench: message shorter than the bench header")

// header is what a message says about itself.
type header struct {
	sentNs   int64
	producer uint16
	seq      uint64 // < 2^48
}

// encodeHeader writes h at the start of b.
// REQUIRES: len(b) >= headerBytes, h.seq <= seqMax.
func encodeHeader(b []byte, h header) {
	binary.BigEndian.PutUint64(b[0:8], uint64(h.sentNs))
	binary.BigEndian.PutUint64(b[8:16], uint64(h.producer)<<48|h.seq&seqMax)
}

// decodeHeader reads the header at the start of b.
func decodeHeader(b []byte) (header, error) {
	if len(b) < headerBytes {
		return header{}, errShortPayload
	}
	w := binary.BigEndian.Uint64(b[8:16])
	return header{sentNs: int64(binary.BigEndian.Uint64(b[0:8])), producer: uint16(w >> 48), seq: w & seqMax}, nil
}

// newValue returns a value of n bytes whose tail (after the header) is
// pseudo-random, from seed: incompressible, and the same in every run
// with the same seed.
func newValue(n int, seed int64, producer int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(seed), uint64(producer)))
	for i := headerBytes; i < n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < n; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}
