package netio

import (
	"errors"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrBadRange is returned by Send for a FileRange with a negative
// descriptor, offset or length.
var ErrBadRange = errors.New("netio: bad file range")

// FileRange is a part of a file sent with sendfile(2): Len bytes of the
// regular file Fd starting at Off. The file must hold them all when the
// range is sent (a shorter file closes the connection with ErrShortFile,
// since the frame on the wire would be corrupt).
type FileRange struct {
	Fd  int
	Off int64
	Len int64
}

// Response is what a connection sends: Header bytes first (typically the
// length prefix, the response header and any inline body), then each of
// Files in order. The bytes of a Response reach the peer contiguously:
// nothing queued later is interleaved with a half-sent range.
//
// Ownership: from Send until Release runs, Header's memory and the Files'
// descriptors belong to the connection and must not change. Without a
// Release, hand over a Header nobody modifies again (a fresh slice).
type Response struct {
	Header []byte
	Files  []FileRange
	// Release, when set, runs on the connection's shard exactly once:
	// with nil after the last byte was handed to the kernel, or with
	// ErrClosed when the connection closed first.
	Release func(err error)
}

// outItem is a queued Response and how much of it is sent.
type outItem struct {
	hdr     []byte // unsent part of the header
	files   []FileRange
	fi      int   // index of the range being sent
	foff    int64 // bytes of files[fi] already sent
	release func(error)
}

func (it *outItem) done() bool { return len(it.hdr) == 0 && it.fi == len(it.files) }

// sendQueue is a connection's outbound queue: a slice used as a FIFO.
type sendQueue struct {
	items []outItem
	head  int
	// bytes is the total unsent: headers plus file ranges.
	bytes int64
	// blocked is set when the socket refused bytes (EAGAIN): the queue
	// waits for EPOLLOUT.
	blocked bool
}

func (q *sendQueue) empty() bool { return q.head == len(q.items) }

func (q *sendQueue) push(r Response) {
	it := outItem{hdr: r.Header, files: r.Files, release: r.Release}
	q.bytes += int64(len(r.Header))
	for _, f := range r.Files {
		q.bytes += f.Len
	}
	if q.head > 0 && q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	q.items = append(q.items, it)
}

// pop removes the head item and runs its Release with err.
func (q *sendQueue) pop(err error) {
	it := q.items[q.head]
	q.items[q.head] = outItem{}
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	if it.release != nil {
		it.release(err)
	}
}

// dropAll releases every queued item with err.
func (q *sendQueue) dropAll(err error) {
	for !q.empty() {
		q.pop(err)
	}
	q.bytes, q.blocked = 0, false
}

// Send queues r on the connection; the bytes are written at the end of the
// shard's current round, coalesced with other responses into one writev,
// and later as the socket accepts them. Send does not take an in-flight
// slot and does not free one (Reply does). On a connection that is
// aborting or closed it returns ErrClosed and runs r.Release(ErrClosed).
func (c *Conn) Send(r Response) error {
	if c.state >= connAborting {
		if r.Release != nil {
			r.Release(ErrClosed)
		}
		return ErrClosed
	}
	for _, f := range r.Files {
		if f.Fd < 0 || f.Off < 0 || f.Len < 0 {
			if r.Release != nil {
				r.Release(ErrBadRange)
			}
			return ErrBadRange
		}
	}
	c.out.push(r)
	c.lp.markDirty(c, dirtyFlush)
	return nil
}

// flush writes queued responses until the queue is empty or the socket is
// full. Headers of consecutive responses go out in one writev; a file range
// goes out with sendfile once the header before it is fully sent.
func (c *Conn) flush() {
	q := &c.out
	for !q.empty() && c.state != connClosed {
		it := &q.items[q.head]
		var err error
		switch {
		case it.done():
			q.pop(nil)
			continue
		case len(it.hdr) > 0:
			err = c.writeHeaders()
		default:
			err = c.sendRange(it)
		}
		switch err {
		case nil:
		case unix.EINTR:
		case unix.EAGAIN:
			q.blocked = true
			c.srv.stats.SendBlocked.Add(1)
			return
		default:
			c.closeNow(err)
			return
		}
	}
}

// writeHeaders writes the unsent headers of the queue's leading items, up
// to the first item that still has file ranges to send after its header.
func (c *Conn) writeHeaders() error {
	q := &c.out
	iov := c.lp.iov[:0]
	for i := q.head; i < len(q.items) && len(iov) < iovMax; i++ {
		it := &q.items[i]
		if len(it.hdr) > 0 {
			v := unix.Iovec{Base: &it.hdr[0]}
			v.SetLen(len(it.hdr))
			iov = append(iov, v)
		}
		if it.fi < len(it.files) {
			break
		}
	}
	var n int
	var err error
	if len(iov) == 1 {
		n, err = unix.Write(c.fd, q.items[q.head].hdr)
	} else {
		r, _, e := unix.Syscall(unix.SYS_WRITEV, uintptr(c.fd), uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)))
		n = int(r)
		if e != 0 {
			n, err = 0, e
		}
	}
	for i := range iov {
		iov[i].Base = nil // do not keep sent buffers reachable
	}
	if err != nil {
		return err
	}
	c.srv.stats.BytesOut.Add(uint64(n))
	q.bytes -= int64(n)
	for i := q.head; n > 0; i++ {
		it := &q.items[i]
		k := min(n, len(it.hdr))
		it.hdr = it.hdr[k:]
		n -= k
	}
	return nil
}

// sendRange sends from the current file range of it with sendfile.
func (c *Conn) sendRange(it *outItem) error {
	f := it.files[it.fi]
	left := f.Len - it.foff
	if left == 0 {
		it.fi, it.foff = it.fi+1, 0
		return nil
	}
	off := f.Off + it.foff
	n, err := unix.Sendfile(c.fd, f.Fd, &off, int(min(left, 1<<30)))
	if n > 0 {
		c.srv.stats.SendfileBytes.Add(uint64(n))
		c.out.bytes -= int64(n)
		it.foff += int64(n)
		if it.foff == f.Len {
			it.fi, it.foff = it.fi+1, 0
		}
	}
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrShortFile
	}
	return nil
}
