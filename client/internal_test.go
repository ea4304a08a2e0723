package client

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/segment/batch"
)

// appendProduceHead followed by the records is byte for byte the frame
// wire.AppendRequest makes.
func TestAppendProduceHeadMatchesWire(t *testing.T) {
	ref := wire.PartitionRef{Topic: "orders", TopicID: wire.TopicID{1, 2, 3}, Partition: 7, Generation: 9}
	records := bytes.Repeat([]byte{0xab}, 1000)
	want := wire.AppendRequest(nil, 0, 0, &wire.ProduceRequest{PartitionRef: ref, Acks: wire.AcksPrimary, TimeoutMs: 1234, Records: records})
	got := append(appendProduceHead(nil, 0, &ref, wire.AcksPrimary, 1234, len(records)), records...)
	if !bytes.Equal(got, want) {
		t.Fatalf("produce head differs from wire.AppendRequest:\n got %x\nwant %x", got[:64], want[:64])
	}
}

// buildBatch makes a batch of n records with offsets base.. and values
// "v<offset>".
func buildBatch(t testing.TB, base int64, n int, codec batch.Codec) []byte {
	b, err := batch.NewBuilder(batch.Options{Codec: codec})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if err := b.AppendKV(int64(i), nil, []byte("v"+string(rune('a'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	batch.SetBaseOffset(out, base)
	return out
}

func TestDecodeRecordsSkipsAndCuts(t *testing.T) {
	data := append(buildBatch(t, 10, 5, batch.CodecNone), buildBatch(t, 15, 5, batch.CodecLZ4)...)
	third := buildBatch(t, 20, 5, batch.CodecNone)
	data = append(data, third[:len(third)-3]...) // cut short
	var it batch.Records
	recs, next, whole, err := decodeRecords(&it, "t", 0, data, 12)
	if err != nil || whole != 2 || next != 20 || len(recs) != 8 || recs[0].Offset != 12 || recs[7].Offset != 19 {
		t.Fatalf("recs %d (first %d), next %d, whole %d, err %v", len(recs), recs[0].Offset, next, whole, err)
	}
}

// decodeRecords never panics, and what it returns is ordered and at or
// after the position asked for.
func FuzzDecodeRecords(f *testing.F) {
	valid := append(buildBatch(f, 0, 3, batch.CodecNone), buildBatch(f, 3, 4, batch.CodecZstd)...)
	f.Add([]byte{}, int64(0))
	f.Add(valid, int64(0))
	f.Add(valid, int64(4))
	f.Add(append(append([]byte(nil), valid...), 0xff, 0, 0, 0, 9, 1, 2), int64(0)) // valid then garbage
	f.Add(bytes.Repeat([]byte{0xff}, 4096), int64(0))
	max := buildBatch(f, 0, 1, batch.CodecNone)
	f.Add(max[:len(max)-1], int64(0))
	f.Fuzz(func(t *testing.T, data []byte, pos int64) {
		if pos < 0 {
			pos = -pos
		}
		var it batch.Records
		recs, next, _, _ := decodeRecords(&it, "t", 0, data, pos)
		if next < pos {
			t.Fatalf("next %d went back from %d", next, pos)
		}
		last := pos - 1
		for _, r := range recs {
			if r.Offset <= last {
				t.Fatalf("offset %d after %d (pos %d)", r.Offset, last, pos)
			}
			last = r.Offset
		}
	})
}

// A response whose correlation id is not in flight is malformed: the
// connection is closed and its requests fail with ErrConnectionLost.
func TestMalformedResponseClosesConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		br := bufio.NewReader(nc)
		for i := 0; i < 2; i++ { // handshake, then one request
			frame, err := readRequest(br)
			if err != nil {
				return
			}
			h, _, _ := wire.ParseRequestHeader(frame)
			corr := h.CorrelationID
			var resp []byte
			if i == 0 {
				resp = wire.AppendResponse(nil, corr, 0, wire.ServerHandshake(1, 1, "x", "test", wire.FrameBytesMaxDefault))
			} else {
				resp = wire.AppendResponse(nil, corr+100, 0, &wire.ListTopicsResponse{})
			}
			nc.Write(resp)
		}
		br.ReadByte() // until the client closes
	}()
	cfg := Config{Brokers: []string{ln.Addr().String()}}.withDefaults()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cn, err := dialConn(ctx, &cfg, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	err = cn.roundTrip(ctx, &wire.ListTopicsRequest{}, &wire.ListTopicsResponse{}, false)
	if !errors.Is(err, ErrConnectionLost) || !errors.Is(err, wire.ErrMalformedResponse) {
		t.Fatalf("got %v, want a lost connection for a malformed response", err)
	}
	if !cn.isClosed() {
		t.Fatal("connection still open")
	}
	cn.close(ErrClosed)
	<-done
}

func readRequest(br *bufio.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := readFull(br, size[:]); err != nil {
		return nil, err
	}
	n := int(size[0])<<24 | int(size[1])<<16 | int(size[2])<<8 | int(size[3])
	frame := make([]byte, n)
	_, err := readFull(br, frame)
	return frame, err
}

func readFull(br *bufio.Reader, b []byte) (int, error) {
	for got := 0; got < len(b); {
		n, err := br.Read(b[got:])
		if err != nil {
			return got, err
		}
		got += n
	}
	return len(b), nil
}

// The in-flight window of an idempotent producer is the protocol's: the
// default uses all of it, and a larger one is refused (the broker would not
// recognise retries of batches pushed out of its memory).
func TestProducerInFlightWindow(t *testing.T) {
	cfg, err := ProducerConfig{}.withDefaults()
	if err != nil || cfg.InFlightPerPartitionMax != wire.IdempotentWindow {
		t.Fatalf("default in flight %d (%v), want the protocol's window %d", cfg.InFlightPerPartitionMax, err, wire.IdempotentWindow)
	}
	if _, err := (ProducerConfig{InFlightPerPartitionMax: wire.IdempotentWindow + 1}).withDefaults(); err == nil {
		t.Fatalf("an idempotent producer accepted %d batches in flight", wire.IdempotentWindow+1)
	}
	if _, err := (ProducerConfig{InFlightPerPartitionMax: wire.IdempotentWindow + 1, DisableIdempotence: true}).withDefaults(); err != nil {
		t.Fatalf("without idempotence: %v", err)
	}
}

// Records without a timestamp share a clock read: one when their batch
// starts and one every stampRecordsMax records after, not one per record
// (8 % of a batching producer's CPU); records with one keep theirs.
func TestProducerStampsOncePerRecordGroup(t *testing.T) {
	var reads int64
	clock := time.UnixMilli(1_700_000_000_000)
	p := &Producer{cfg: ProducerConfig{BatchBytesMax: 1 << 20, Linger: time.Hour}, now: func() time.Time {
		reads++
		return clock.Add(time.Duration(reads) * time.Millisecond)
	}}
	s := newPartSender(p, "t", 0)
	defer s.stop()
	const n = 2*stampRecordsMax + 3
	own := time.UnixMilli(42)
	for i := 0; i < n; i++ {
		rec := Record{Topic: "t", Value: []byte("v")}
		if i == 5 {
			rec.Timestamp = own
		}
		if _, err := s.add(nil, &rec, rec.Timestamp.UnixMilli(), rec.Timestamp.IsZero(), 20, nil, false); err != nil {
			t.Fatal(err)
		}
	}
	if reads != 3 {
		t.Fatalf("%d clock reads for %d records, want 3 (at the batch start, then every %d)", reads, n, stampRecordsMax)
	}
	stamped := 0 // records before this one that took a stamp
	for i, r := range s.recs {
		want := own.UnixMilli()
		if i != 5 {
			want = clock.Add(time.Duration(1+stamped/stampRecordsMax) * time.Millisecond).UnixMilli()
			stamped++
		}
		if r.ts != want {
			t.Fatalf("record %d stamped %d, want %d", i, r.ts, want)
		}
	}
}
