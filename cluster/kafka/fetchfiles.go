package kafka

import (
	"bytes"
	"encoding/binary"
	"io"
	"sync"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/segment/vfs"
)

// A Fetch answer sends its record bytes from the segment files with
// sendfile, as the native fetch does, instead of reading them into the
// response. kmsg encodes the response with a placeholder (a marker) in
// each partition's records field; answer splits the encoded frame at the
// markers into netio responses, each its part of the frame followed by
// that partition's file ranges, with the field's length rewritten to the
// records' length. The pieces go out back to back (queued in one call on
// the connection's shard), so the client reads one ordinary frame.
//
// The log's control batches (a new primary's no-op, a membership
// change's marker) are left out by offset ranges: dataRanges reads each
// batch's header (not its records) and the ranges skip the control
// batches, because kafka-python 2.0 hands a control batch's record to the
// application.

// headerWindowBytes is how much of a segment file one read for batch
// headers takes: the headers of the batches that start in it cost no
// further read, so small batches cost a read per window and large ones a
// read per batch, never more than copying the records would.
const headerWindowBytes = 4 << 10

var headerWindows = sync.Pool{New: func() any { b := make([]byte, headerWindowBytes); return &b }}

// partRecords is one partition's records for an answer: bytes copied
// into memory (a file system without descriptors, tests), or ranges of
// segment files for sendfile.
type partRecords struct {
	copied []byte
	files  []netio.FileRange
	// bytes is the records' length, copied or in files.
	bytes int
	// recs holds the files open until the answer is sent; zero when
	// copied (released then).
	recs service.Records
}

// fileSpan is a byte range of a segment file holding whole batches.
type fileSpan struct {
	r        io.ReaderAt
	fd       int
	pos, len int64
}

// dataRanges returns the ranges of spans that hold data batches (whole
// spans cut around their control batches, adjacent kept batches merged),
// their total bytes, the offset after the last batch read and whether a
// control batch was left out. It reads only batch headers. A header it
// cannot read ends the scan of its span: the rest of the span is kept,
// for the client to judge (as stripControl does).
func dataRanges(spans []fileSpan) (files []netio.FileRange, total int, next int64, dropped bool) {
	bp := headerWindows.Get().(*[]byte)
	defer headerWindows.Put(bp)
	keep := func(fd int, from, to int64) {
		if to <= from {
			return
		}
		total += int(to - from)
		if n := len(files); n > 0 && files[n-1].Fd == fd && files[n-1].Off+files[n-1].Len == from {
			files[n-1].Len += to - from
			return
		}
		files = append(files, netio.FileRange{Fd: fd, Off: from, Len: to - from})
	}
	for _, sp := range spans {
		w := headerWindow{r: sp.r, buf: *bp}
		pos, end, run := sp.pos, sp.pos+sp.len, sp.pos
		for pos < end {
			b, err := w.at(pos, end)
			if err != nil {
				break
			}
			h, err := batch.ReadHeader(b)
			if err != nil || h.Size() <= 0 || pos+int64(h.Size()) > end {
				break
			}
			if h.IsControl() && !h.IsTxnMarker() {
				keep(sp.fd, run, pos)
				run, dropped = pos+int64(h.Size()), true
			}
			next = h.LastOffset() + 1
			pos += int64(h.Size())
		}
		keep(sp.fd, run, end)
	}
	return files, total, next, dropped
}

// headerWindow reads batch headers from a file through one buffer.
type headerWindow struct {
	r    io.ReaderAt
	buf  []byte
	off  int64 // file offset of buf[0]
	have int   // valid bytes in buf
}

// at returns at least batch.HeaderSize bytes of the file from pos,
// reading (up to end) only when the window does not hold them.
func (w *headerWindow) at(pos, end int64) ([]byte, error) {
	if pos >= w.off && pos+batch.HeaderSize <= w.off+int64(w.have) {
		return w.buf[pos-w.off : w.have], nil
	}
	n := int(min(int64(len(w.buf)), end-pos))
	if n < batch.HeaderSize {
		return nil, batch.ErrShort
	}
	got, err := w.r.ReadAt(w.buf[:n], pos)
	if got < batch.HeaderSize {
		if err == nil {
			err = batch.ErrShort
		}
		return nil, err
	}
	w.off, w.have = pos, got
	return w.buf[:got], nil
}

// keepData turns a read's records into what the answer sends: file
// ranges, or (on a file system without descriptors) the bytes copied;
// without the control batches when strip is set. next is the offset
// after the last batch read, dropped whether control batches were left
// out. The records are released when copied; else the ranges hold them.
func keepData(recs service.Records, strip bool) (pr partRecords, next int64, dropped bool, err error) {
	spans := make([]fileSpan, 0, len(recs.Spans))
	for _, sp := range recs.Spans {
		if sp.Fd() == vfs.InvalidFd {
			buf, err := recs.AppendTo(make([]byte, 0, recs.Bytes))
			recs.Release()
			if err != nil {
				return partRecords{}, 0, false, err
			}
			if strip {
				buf, next, dropped = stripControl(buf)
			}
			return partRecords{copied: buf, bytes: len(buf)}, next, dropped, nil
		}
		spans = append(spans, fileSpan{r: sp.File(), fd: int(sp.Fd()), pos: sp.Pos, len: sp.Len})
	}
	if !strip {
		pr = partRecords{bytes: int(recs.Bytes), recs: recs}
		for _, sp := range spans {
			pr.files = append(pr.files, netio.FileRange{Fd: sp.fd, Off: sp.pos, Len: sp.len})
		}
		return pr, 0, false, nil
	}
	files, total, next, dropped := dataRanges(spans)
	return partRecords{files: files, bytes: total, recs: recs}, next, dropped, nil
}

// release lets pr's files go (nothing when copied).
func (pr *partRecords) release() {
	if len(pr.recs.Spans) > 0 {
		pr.recs.Release()
	}
}

// markerBytes is a placeholder's length: markerPrefix, then the part's
// index (uint32).
const markerBytes = 16

// markerPrefix starts every placeholder. Its bytes (0xff, 0x00) appear in
// no topic name, and a match is also checked against the length prefix
// kmsg writes before it, so a coincidence elsewhere is skipped.
var markerPrefix = [12]byte{0xff, 0x00, 0xfe, 'c', 's', '-', 'f', 'i', 'l', 'e', 0x00, 0xff}

// fetchFiles holds the file-backed records of one fetch (both passes),
// so that they are released exactly once: with the answer once it is
// sent, or when the answer is dropped.
type fetchFiles struct {
	parts    []partRecords
	released bool
}

// records is what a partition's RecordBatches field holds for pr: its
// bytes when copied (empty, never null: librdkafka refuses a null record
// set from a partition without an error), else a placeholder answer
// replaces with its files.
func (f *fetchFiles) records(pr partRecords) []byte {
	if pr.files == nil {
		if pr.copied == nil {
			return []byte{}
		}
		return pr.copied
	}
	f.parts = append(f.parts, pr)
	m := make([]byte, markerBytes)
	copy(m, markerPrefix[:])
	binary.BigEndian.PutUint32(m[len(markerPrefix):], uint32(len(f.parts)-1))
	return m
}

// part is the file-backed part b is the placeholder of, or nil.
func (f *fetchFiles) part(b []byte) *partRecords {
	if len(b) != markerBytes || !bytes.HasPrefix(b, markerPrefix[:]) {
		return nil
	}
	i := binary.BigEndian.Uint32(b[len(markerPrefix):])
	if int(i) >= len(f.parts) {
		return nil
	}
	return &f.parts[i]
}

// size is the records' length of a RecordBatches field.
func (f *fetchFiles) size(b []byte) int {
	if p := f.part(b); p != nil {
		return p.bytes
	}
	return len(b)
}

// release lets every part's files go, once.
func (f *fetchFiles) release() {
	if f.released {
		return
	}
	f.released = true
	for i := range f.parts {
		f.parts[i].release()
	}
}

// answer encodes resp for h and splits it at its placeholders into
// pieces that send each partition's files after its part of the frame.
// The files are released once the last piece is sent (or dropped).
func (f *fetchFiles) answer(h RequestHeader, resp *kmsg.FetchResponse) answer {
	frame := encodeResponse(h, resp)
	if len(f.parts) == 0 {
		f.release()
		return answer{frame: frame}
	}
	flexible := resp.IsFlexible()
	var pieces []netio.Response
	total, start, from := 0, 0, 4
	for {
		i := bytes.Index(frame[from:], markerPrefix[:])
		if i < 0 {
			break
		}
		at := from + i
		from = at + 1
		if at+markerBytes > len(frame) {
			break
		}
		p := f.part(frame[at : at+markerBytes])
		lenAt := at - 4 // int32 length before the bytes
		if flexible {
			lenAt = at - 1 // uvarint(16+1)
		}
		if p == nil || lenAt < start || !bytes.Equal(frame[lenAt:at], placeholderLength(flexible)) {
			continue
		}
		head := append([]byte(nil), frame[start:lenAt]...)
		if flexible {
			head = kbin.AppendUvarint(head, uint32(p.bytes)+1)
		} else {
			head = kbin.AppendInt32(head, int32(p.bytes))
		}
		pieces = append(pieces, netio.Response{Header: head, Files: p.files})
		total += len(head) + p.bytes
		start = at + markerBytes
		from = start
	}
	last := frame[start:]
	total += len(last)
	release := f.release
	pieces = append(pieces, netio.Response{Header: last, Release: func(error) { release() }})
	binary.BigEndian.PutUint32(pieces[0].Header, uint32(total-4))
	return answer{pieces: pieces, drop: release}
}

// placeholderLength is how kmsg encodes a placeholder's length: int32,
// or in flexible versions uvarint(length+1).
func placeholderLength(flexible bool) []byte {
	if flexible {
		return []byte{markerBytes + 1}
	}
	return binary.BigEndian.AppendUint32(nil, markerBytes)
}
