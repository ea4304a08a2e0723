package node

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/segment/batch"
)

// rawConn speaks the client protocol by hand, so tests can send what no
// well-behaved client would: garbage, truncated frames, unknown APIs.
// Requests are answered in order on one connection here because every
// test sends one at a time unless it says otherwise.
type rawConn struct {
	t    testing.TB
	c    net.Conn
	r    *bufio.Reader
	corr uint32
}

// rawIOTimeout bounds every read and write of a rawConn.
const rawIOTimeout = 10 * time.Second

// dialRaw connects without a handshake.
func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, rawIOTimeout)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	rc := &rawConn{t: t, c: c, r: bufio.NewReaderSize(c, 64<<10)}
	t.Cleanup(func() { c.Close() })
	return rc
}

// dialHandshaken connects and handshakes.
func dialHandshaken(t testing.TB, addr string) *rawConn {
	t.Helper()
	rc := dialRaw(t, addr)
	var resp wire.HandshakeResponse
	if err := rc.call(&wire.HandshakeRequest{ProtocolMin: 1, ProtocolMax: 1, ClientID: "node-test"}, &resp); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	return rc
}

// writeRaw writes b as it is.
func (rc *rawConn) writeRaw(b []byte) error {
	rc.c.SetWriteDeadline(time.Now().Add(rawIOTimeout))
	_, err := rc.c.Write(b)
	return err
}

// send writes one request frame at version 0 and returns its correlation id.
func (rc *rawConn) send(req wire.Request) uint32 {
	rc.t.Helper()
	rc.corr++
	if err := rc.writeRaw(wire.AppendRequest(nil, rc.corr, 0, req)); err != nil {
		rc.t.Fatalf("send %s: %v", req.APIKey(), err)
	}
	return rc.corr
}

// frame builds a request frame with any header and body.
func frame(key wire.APIKey, version uint16, corr uint32, flags uint16, body []byte) []byte {
	b := wire.AppendRequestHeader(nil, wire.RequestHeader{APIKey: key, APIVersion: version, CorrelationID: corr, Flags: flags}, len(body))
	return append(b, body...)
}

// errConnClosed says the server closed the connection instead of answering.
var errConnClosed = errors.New("connection closed by the server")

// read reads one response frame: its header and body, or errConnClosed.
func (rc *rawConn) read() (wire.ResponseHeader, []byte, error) {
	rc.c.SetReadDeadline(time.Now().Add(rawIOTimeout))
	var size [4]byte
	if _, err := io.ReadFull(rc.r, size[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isReset(err) {
			return wire.ResponseHeader{}, nil, errConnClosed
		}
		return wire.ResponseHeader{}, nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > 64<<20 {
		return wire.ResponseHeader{}, nil, fmt.Errorf("response frame of %d bytes", n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(rc.r, buf); err != nil {
		return wire.ResponseHeader{}, nil, fmt.Errorf("response body: %w", err)
	}
	h, body, err := wire.ParseResponseHeader(buf)
	return h, body, err
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout() && !errors.Is(err, os.ErrDeadlineExceeded)
}

// readFor reads the response to corr and decodes it into resp; a broker
// error comes back as *wire.ErrorResponse.
func (rc *rawConn) readFor(corr uint32, resp wire.Response) error {
	h, body, err := rc.read()
	if err != nil {
		return err
	}
	if h.CorrelationID != corr {
		return fmt.Errorf("response to correlation id %d, want %d", h.CorrelationID, corr)
	}
	if resp == nil {
		if h.ErrorCode == wire.CodeNone {
			return nil
		}
		return wire.DecodeResponseBody(h, body, 0, nil)
	}
	return wire.DecodeResponseBody(h, body, 0, resp)
}

// call sends req and reads its answer into resp.
func (rc *rawConn) call(req wire.Request, resp wire.Response) error {
	rc.t.Helper()
	return rc.readFor(rc.send(req), resp)
}

// expectClosed waits for the server to close the connection, skipping any
// responses sent before it did; it returns them.
func (rc *rawConn) expectClosed() []wire.ResponseHeader {
	rc.t.Helper()
	var got []wire.ResponseHeader
	for i := 0; i < 1000; i++ {
		h, _, err := rc.read()
		if errors.Is(err, errConnClosed) {
			return got
		}
		if err != nil {
			rc.t.Fatalf("waiting for the server to close: %v", err)
		}
		got = append(got, h)
	}
	rc.t.Fatal("the server kept answering instead of closing")
	return nil
}

// metadata asks for every topic's routes.
func (rc *rawConn) metadata() *wire.MetadataResponse {
	rc.t.Helper()
	var resp wire.MetadataResponse
	if err := rc.call(&wire.MetadataRequest{}, &resp); err != nil {
		rc.t.Fatalf("metadata: %v", err)
	}
	return &resp
}

// createTopic creates a topic and returns its id.
func (rc *rawConn) createTopic(name string, partitions int32) wire.TopicID {
	rc.t.Helper()
	var resp wire.CreateTopicResponse
	if err := rc.call(&wire.CreateTopicRequest{Name: name, Partitions: partitions, ReplicationFactor: 1}, &resp); err != nil {
		rc.t.Fatalf("create topic %s: %v", name, err)
	}
	return resp.TopicID
}

// produce appends records with the given values to topic/partition.
func (rc *rawConn) produce(ref wire.PartitionRef, values ...string) (wire.ProduceResponse, error) {
	rc.t.Helper()
	var resp wire.ProduceResponse
	err := rc.call(&wire.ProduceRequest{PartitionRef: ref, Records: mkBatch(rc.t, values...)}, &resp)
	return resp, err
}

// fetch reads committed records from offset and returns their values
// (control batches skipped).
func (rc *rawConn) fetch(ref wire.PartitionRef, offset int64) ([]string, wire.FetchResponse, error) {
	rc.t.Helper()
	var resp wire.FetchResponse
	if err := rc.call(&wire.FetchRequest{PartitionRef: ref, FetchOffset: offset, MaxBytes: 1 << 20}, &resp); err != nil {
		return nil, resp, err
	}
	return batchValues(rc.t, resp.Records, offset), resp, nil
}

// mkBatch builds a plain (not idempotent) batch of values.
func mkBatch(t testing.TB, values ...string) []byte {
	t.Helper()
	b, err := batch.NewBuilder(batch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range values {
		if err := b.AppendKV(time.Now().UnixMilli(), nil, []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// batchValues decodes every data record at or after from in data.
func batchValues(t testing.TB, data []byte, from int64) []string {
	t.Helper()
	var out []string
	var it batch.Records
	for {
		b, rest, err := batch.Cut(data)
		if err != nil {
			t.Fatalf("fetched bytes: %v", err)
		}
		if b == nil {
			return out
		}
		data = rest
		h, err := batch.ReadHeader(b)
		if err != nil {
			t.Fatal(err)
		}
		if h.IsControl() {
			continue
		}
		if err := it.Reset(b); err != nil {
			t.Fatal(err)
		}
		for it.Next() {
			if r := it.Record(); r.Offset >= from {
				out = append(out, string(r.Value))
			}
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// code returns err's wire error name, or its text when it has none.
func code(err error) string {
	var er *wire.ErrorResponse
	if errors.As(err, &er) {
		return er.Err.Name
	}
	if err == nil {
		return "NONE"
	}
	return err.Error()
}
