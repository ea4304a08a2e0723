package segment

import (
	"math/bits"

	"golang.org/x/sys/unix"
)

// Write buffers live outside the Go heap (anonymous mmap): the kernel reads
// them after Write returns (io_uring), so they must never move and must
// outlive the operation; off-heap memory also costs the collector nothing.
// A buffer belongs to exactly one owner at a time: the pool, a log filling
// it, or an operation in flight.

const (
	bufClassMinShift = 12 // 4 KiB
	bufClassCount    = 14 // 4 KiB .. 32 MiB
	// bufBytesMax is the largest buffer class (32 MiB): it holds one
	// batch of batch.BatchBytesMax with room to spare.
	bufBytesMax = 1 << (bufClassMinShift + bufClassCount - 1)
	// poolCachedBytesMaxDefault bounds the memory the pool keeps for reuse.
	poolCachedBytesMaxDefault = 64 << 20
)

// wbuf is a write buffer. Invariant: 0 <= n <= len(mem).
type wbuf struct {
	mem   []byte
	n     int
	class int
	// release is set on a lent buffer: mem is a caller's batch the log
	// writes in place (AppendLeaderCheckedLent), never the pool's, and put
	// hands it back by calling release instead of recycling it.
	release func()
}

func (b *wbuf) free() int      { return len(b.mem) - b.n }
func (b *wbuf) bytes() []byte  { return b.mem[:b.n] }
func classBytes(class int) int { return 1 << (bufClassMinShift + class) }

// classFor is the smallest class holding n bytes. REQUIRES: n <= bufBytesMax.
func classFor(n int) int {
	if n <= 1<<bufClassMinShift {
		return 0
	}
	return bits.Len(uint(n-1)) - bufClassMinShift
}

// bufPool recycles write buffers by size class. Owned by one goroutine.
// Invariant: cachedBytes is the sum of the sizes of the buffers in free.
type bufPool struct {
	free           [bufClassCount][]*wbuf
	cachedBytes    int64
	cachedBytesMax int64
	// liveBytes counts mapped bytes outside the pool (for tests).
	liveBytes int64
}

func (p *bufPool) get(class int) (*wbuf, error) {
	if l := p.free[class]; len(l) > 0 {
		b := l[len(l)-1]
		l[len(l)-1] = nil
		p.free[class] = l[:len(l)-1]
		p.cachedBytes -= int64(len(b.mem))
		p.liveBytes += int64(len(b.mem))
		return b, nil
	}
	mem, err := unix.Mmap(-1, 0, classBytes(class), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return nil, err
	}
	p.liveBytes += int64(len(mem))
	return &wbuf{mem: mem, class: class}, nil
}

func (p *bufPool) put(b *wbuf) {
	if r := b.release; r != nil {
		// Lent: the pool never owned it. Clearing it first keeps a second
		// put from releasing twice.
		b.release, b.mem, b.n = nil, nil, 0
		r()
		return
	}
	p.liveBytes -= int64(len(b.mem))
	b.n = 0
	if p.cachedBytes+int64(len(b.mem)) > p.cachedBytesMax {
		_ = unix.Munmap(b.mem)
		b.mem = nil
		return
	}
	p.cachedBytes += int64(len(b.mem))
	p.free[b.class] = append(p.free[b.class], b)
}

// close unmaps every cached buffer. Buffers still out are unmapped when put.
func (p *bufPool) close() {
	for c := range p.free {
		for _, b := range p.free[c] {
			_ = unix.Munmap(b.mem)
		}
		p.free[c] = nil
	}
	p.cachedBytes, p.cachedBytesMax = 0, 0
}
