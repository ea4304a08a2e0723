package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"net"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// TestIdealBrokerWritesWhatWasSent runs the ideal broker over several
// segments, syncs and preallocations, keeps its files, and checks that the
// log holds exactly the frames the client built, in order.
func TestIdealBrokerWritesWhatWasSent(t *testing.T) {
	dir := t.TempDir()
	opt := IdealOptions{Dir: dir, Time: time.Minute, BytesMax: 3 << 20, MessageBytes: 1 << 10, FrameMessages: 16,
		PreallocBytes: 100 << 10, SyncBytes: 256 << 10, SegmentBytes: 1 << 20, Keep: true}
	res, err := RunIdeal(context.Background(), opt)
	if err != nil {
		t.Fatal(err)
	}
	if res.Bytes != opt.BytesMax || res.Messages != opt.BytesMax/int64(opt.MessageBytes) {
		t.Fatalf("wrote %d messages (%d bytes), want %d bytes", res.Messages, res.Bytes, opt.BytesMax)
	}
	if res.ServerCPUNs <= 0 || res.ClientCPUNs <= 0 {
		t.Fatalf("server CPU %d ns, client CPU %d ns: both did work", res.ServerCPUNs, res.ClientCPUNs)
	}
	if res.ClientCPUPerMsgNs != float64(res.ClientCPUNs)/float64(res.Messages) || res.ServerCPUPerMsgNs != res.CPUPerMessageNs() {
		t.Fatalf("per-message CPU in the JSON: server %v, client %v", res.ServerCPUPerMsgNs, res.ClientCPUPerMsgNs)
	}
	names, err := filepath.Glob(filepath.Join(dir, "corestream-ideal-*.log"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	if len(names) < 2 { // a segment rolls once past 1 MiB, after a write of up to 1 MiB
		t.Fatalf("%d segments, want at least 2 for 3 MiB", len(names))
	}
	var log []byte
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		log = append(log, b...)
	}
	src := idealSource()
	body := opt.MessageBytes * opt.FrameMessages
	want := make([]byte, idealFrameHeaderBytes+body)
	var k uint64
	for off := 0; off < len(log); off += len(want) {
		b := want[idealFrameHeaderBytes:]
		for i := 0; i < opt.FrameMessages; i++ {
			idealMessage(b[i*opt.MessageBytes:(i+1)*opt.MessageBytes], src, k)
			k++
		}
		binary.BigEndian.PutUint32(want, uint32(body))
		binary.BigEndian.PutUint32(want[4:], crc32.Checksum(b, idealCRC))
		if off+len(want) > len(log) || !bytes.Equal(log[off:off+len(want)], want) {
			t.Fatalf("the log differs from the frames sent in the frame at byte %d", off)
		}
	}
	if int64(k) != res.Messages {
		t.Fatalf("the log holds %d messages, the server counted %d", k, res.Messages)
	}
}

// TestIdealBrokerRejectsACorruptFrame: a frame whose CRC does not match
// stops the server with ErrIdealCorrupt.
func TestIdealBrokerRejectsACorruptFrame(t *testing.T) {
	opt := DefaultIdealOptions()
	opt.Dir = t.TempDir()
	s, err := newIdealServer(opt)
	if err != nil {
		t.Fatal(err)
	}
	srv, cli := net.Pipe()
	defer srv.Close()
	go func() {
		frame := make([]byte, idealFrameHeaderBytes+64)
		binary.BigEndian.PutUint32(frame, 64)
		binary.BigEndian.PutUint32(frame[4:], 1) // not the body's CRC
		cli.Write(frame)
		cli.Close()
	}()
	_, _, _, err = s.serve(srv, 64)
	if !errors.Is(err, ErrIdealCorrupt) {
		t.Fatalf("serve = %v, want ErrIdealCorrupt", err)
	}
}
