package kafka

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/segment/batch"
)

// readRanges reads files' ranges of f back to back.
func readRanges(t *testing.T, f *os.File, files []netio.FileRange) []byte {
	t.Helper()
	var out []byte
	for _, r := range files {
		if r.Fd != int(f.Fd()) {
			t.Fatalf("range on fd %d, want %d", r.Fd, f.Fd())
		}
		b := make([]byte, r.Len)
		if _, err := f.ReadAt(b, r.Off); err != nil {
			t.Fatal(err)
		}
		out = append(out, b...)
	}
	return out
}

// tempFile is a file holding b.
func tempFile(t *testing.T, b []byte) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "seg"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	return f
}

// dataRanges must keep exactly the bytes stripControl keeps, reading
// only headers, whether batches are smaller or larger than its window.
func TestDataRanges(t *testing.T) {
	noop0 := testBatch(t, 0, 1, true)
	data1 := testBatch(t, 1, 3, false)
	noop4 := testBatch(t, 4, 1, true)
	data5 := testBatch(t, 5, 2, false)
	big7 := testBatch(t, 7, 2000, false) // larger than headerWindowBytes
	noop2007 := testBatch(t, 2007, 1, true)
	marker4 := batch.BuildTxnMarker(batch.TxnMarker{ProducerID: 3}, 1)
	batch.SetBaseOffset(marker4, 4)
	if len(big7) <= headerWindowBytes {
		t.Fatalf("the large batch has %d bytes, not more than the window", len(big7))
	}
	cat := func(bs ...[]byte) []byte { return bytes.Join(bs, nil) }
	junk := bytes.Repeat([]byte{0xee}, 100) // the span starts inside the file
	for _, tc := range []struct {
		name    string
		in      []byte
		ranges  int
		next    int64
		dropped bool
	}{
		{"empty", nil, 0, 0, false},
		{"data only", cat(data1, data5), 1, 7, false},
		{"control only", cat(noop0), 0, 1, true},
		{"control between data", cat(noop0, data1, noop4, data5), 2, 7, true},
		{"large batches", cat(noop4, data5, big7, noop2007), 1, 2008, true},
		{"control at the end", cat(data1, noop4), 1, 5, true},
		{"a torn batch is kept", cat(noop0, data1[:20]), 1, 1, true},
		{"a transaction marker is kept", cat(data1, marker4, noop4, data5), 2, 7, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tempFile(t, cat(junk, tc.in, junk))
			files, total, next, dropped := dataRanges([]fileSpan{{r: f, fd: int(f.Fd()), pos: int64(len(junk)), len: int64(len(tc.in))}})
			want, wantNext, wantDropped := stripControl(append([]byte(nil), tc.in...))
			got := readRanges(t, f, files)
			if !bytes.Equal(got, want) || total != len(want) || next != wantNext || dropped != wantDropped {
				t.Fatalf("got %d bytes (total %d), next %d, dropped %v; stripControl keeps %d bytes, next %d, dropped %v",
					len(got), total, next, dropped, len(want), wantNext, wantDropped)
			}
			if len(files) != tc.ranges {
				t.Fatalf("%d ranges, want %d (adjacent batches merged): %+v", len(files), tc.ranges, files)
			}
		})
	}
}

// An answer split around its file ranges must be, byte for byte, the
// frame kmsg encodes with the records in memory, at every fetch version
// we serve (int32 lengths up to 11, uvarints from 12).
func TestFetchAnswerFromFiles(t *testing.T) {
	data1 := testBatch(t, 1, 3, false)
	big7 := testBatch(t, 7, 2000, false) // its uvarint length takes 3 bytes
	copied := testBatch(t, 40, 2, false)
	f := tempFile(t, bytes.Join([][]byte{data1, big7}, nil))
	for v := int16(4); v <= 12; v++ {
		build := func(files *fetchFiles) *kmsg.FetchResponse {
			resp := kmsg.NewPtrFetchResponse()
			resp.SetVersion(v)
			for ti, name := range []string{"a", "b"} {
				rt := kmsg.NewFetchResponseTopic()
				rt.Topic = name
				for pi := 0; pi < 2; pi++ {
					rp := kmsg.NewFetchResponseTopicPartition()
					rp.Partition, rp.HighWatermark = int32(pi), int64(100+ti)
					switch {
					case ti == 0 && pi == 0:
						rp.RecordBatches = data1
						if files != nil {
							rp.RecordBatches = files.records(partRecords{files: []netio.FileRange{{Fd: int(f.Fd()), Off: 0, Len: int64(len(data1))}}, bytes: len(data1)})
						}
					case ti == 0 && pi == 1:
						rp.RecordBatches = copied
						if files != nil {
							rp.RecordBatches = files.records(partRecords{copied: copied, bytes: len(copied)})
						}
					case ti == 1 && pi == 1:
						rp.RecordBatches = big7
						if files != nil {
							rp.RecordBatches = files.records(partRecords{files: []netio.FileRange{{Fd: int(f.Fd()), Off: int64(len(data1)), Len: int64(len(big7))}}, bytes: len(big7)})
						}
					}
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
			return resp
		}
		h := RequestHeader{Key: fetchKey, Version: v, CorrelationID: 7}
		want := encodeResponse(h, build(nil))
		files := &fetchFiles{}
		a := files.answer(h, build(files))
		if len(a.pieces) != 3 {
			t.Fatalf("v%d: %d pieces, want 3 (two partitions from files, then the rest)", v, len(a.pieces))
		}
		var got []byte
		for _, p := range a.pieces {
			got = append(got, p.Header...)
			got = append(got, readRanges(t, f, p.Files)...)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("v%d: the pieces make %d bytes that differ from the %d of the frame with the records in memory", v, len(got), len(want))
		}
		if a.pieces[len(a.pieces)-1].Release == nil {
			t.Fatalf("v%d: the last piece does not release the files", v)
		}
	}
}

// A partition answered without records and without an error carries an
// empty record set, not a null one: librdkafka (kcat) refuses a null one
// ("invalid MessageSetSize -1") and retries the fetch forever.
func TestEmptyRecordsAreNotNull(t *testing.T) {
	files := &fetchFiles{}
	if b := files.records(partRecords{}); b == nil {
		t.Fatal("an empty read is answered with a null record set")
	}
	resp := kmsg.NewPtrFetchResponse()
	rt := kmsg.NewFetchResponseTopic()
	for i := 0; i < 2; i++ {
		rp := kmsg.NewFetchResponseTopicPartition()
		rp.RecordBatches = make([]byte, 50)
		rt.Partitions = append(rt.Partitions, rp)
	}
	resp.Topics = append(resp.Topics, rt)
	trimToMaxBytes(resp, 60, func(b []byte) int { return len(b) })
	if b := resp.Topics[0].Partitions[1].RecordBatches; b == nil || len(b) != 0 {
		t.Fatalf("a partition trimmed to fit max_bytes holds %v, want an empty record set", b)
	}
}

// FuzzDataRanges: on any bytes, the ranges dataRanges keeps (reading
// headers from a file through its window) are exactly the bytes
// stripControl keeps (walking them in memory), with the same next offset
// and verdict, and it never panics or loops.
func FuzzDataRanges(f *testing.F) {
	noop := testBatch(f, 0, 1, true)
	data := testBatch(f, 1, 3, false)
	big := testBatch(f, 4, 2000, false)
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0xff}, batch.HeaderSize))
	f.Add(append(append([]byte(nil), noop...), data...))
	f.Add(append(append(append([]byte(nil), data...), batch.BuildTxnMarker(batch.TxnMarker{ProducerID: 3}, 1)...), noop...))
	f.Add(append(append(append([]byte(nil), data...), big...), 1, 2, 3)) // valid, then garbage
	f.Fuzz(func(t *testing.T, in []byte) {
		file := tempFile(t, in)
		files, total, next, dropped := dataRanges([]fileSpan{{r: file, fd: int(file.Fd()), pos: 0, len: int64(len(in))}})
		want, wantNext, wantDropped := stripControl(append([]byte(nil), in...))
		got := readRanges(t, file, files)
		if !bytes.Equal(got, want) || total != len(want) || next != wantNext || dropped != wantDropped {
			t.Fatalf("dataRanges kept %d bytes (total %d), next %d, dropped %v; stripControl %d, next %d, dropped %v",
				len(got), total, next, dropped, len(want), wantNext, wantDropped)
		}
	})
}
