package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/segment/batch"
)

// kafkaRequest is a whole request frame: Kafka's header for key and
// version (v2, with tagged fields, for flexible versions), then body.
func kafkaRequest(key, version int16, corr int32, flexible bool, body []byte) []byte {
	b := []byte{0, 0, 0, 0}
	b = kbin.AppendInt16(b, key)
	b = kbin.AppendInt16(b, version)
	b = kbin.AppendInt32(b, corr)
	b = kbin.AppendNullableString(b, kmsg.StringPtr("raw-test"))
	if flexible {
		b = append(b, 0)
	}
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// encoded is req at version v as a request frame.
func encoded(req kmsg.Request, v int16, corr int32) []byte {
	req.SetVersion(v)
	return kafkaRequest(req.Key(), v, corr, req.IsFlexible(), req.AppendTo(nil))
}

// readFrame reads one response frame; io.EOF (or a reset) when the
// server closed the connection.
func readFrame(c net.Conn) ([]byte, error) {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var n [4]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(n[:]))
	_, err := io.ReadFull(c, body)
	return body, err
}

// closedByServer says whether err is the server closing the connection
// (not our read deadline).
func closedByServer(err error) bool {
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// Bad input on the Kafka port is answered with a Kafka error or a closed
// connection, never a hang, and leaves the node and every other
// connection serving: frames without a header, unknown API keys, APIs
// and versions not served, garbage after a valid header, oversize
// frames. Pipelined requests are answered in order.
func TestKafkaBadInput(t *testing.T) {
	t.Parallel()
	n := runNode(t, t.TempDir(), withKafka)
	addr := n.KafkaAddr()
	good := kafkaClient(t, []string{addr})
	ping := func(when string) {
		t.Helper()
		req := kmsg.NewPtrMetadataRequest()
		if _, err := req.RequestWith(t.Context(), good); err != nil {
			t.Fatalf("%s: a well-behaved client's Metadata failed: %v", when, err)
		}
	}
	ping("before")

	garbage := []byte{0xde, 0xad, 0xbe, 0xef, 0xff, 0xff, 0xff, 0xff}
	cases := []struct {
		name  string
		frame []byte
		// check reads the answer; nil means the server must close.
		check func(t *testing.T, body []byte)
	}{
		{"frame shorter than a header", []byte{0, 0, 0, 3, 0, 1, 2}, nil},
		{"client id past the frame", []byte{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 7, 0, 99}, nil},
		{"unknown api key", kafkaRequest(999, 0, 7, false, nil), nil},
		{"api versions from the future", kafkaRequest(18, 99, 7, true, nil), func(t *testing.T, body []byte) {
			resp := kmsg.NewPtrApiVersionsResponse() // v0: the answer a client of any version reads
			if binary.BigEndian.Uint32(body) != 7 {
				t.Fatalf("correlation id %d", binary.BigEndian.Uint32(body))
			}
			if err := resp.ReadFrom(body[4:]); err != nil || resp.ErrorCode != kerr.UnsupportedVersion.Code || len(resp.ApiKeys) == 0 {
				t.Fatalf("answer %+v, %v", resp, err)
			}
		}},
		{"an API not served (DescribeClientQuotas v0)", encoded(kmsg.NewPtrDescribeClientQuotasRequest(), 0, 7), func(t *testing.T, body []byte) {
			resp := kmsg.NewPtrDescribeClientQuotasResponse()
			resp.SetVersion(0)
			if err := resp.ReadFrom(body[4:]); err != nil || resp.ErrorCode != kerr.UnsupportedVersion.Code {
				t.Fatalf("answer %+v, %v", resp, err)
			}
		}},
		{"a version not served without an error field (Produce v2)", encoded(kmsg.NewPtrProduceRequest(), 2, 7), nil},
		{"a version whose error field it lacks (Fetch v3)", encoded(kmsg.NewPtrFetchRequest(), 3, 7), nil},
		{"garbage after a valid header", kafkaRequest(0, 9, 7, true, garbage), nil},
		{"oversize frame", append([]byte{0x7f, 0xff, 0xff, 0xff, 0, 18, 0, 3, 0, 0, 0, 7}, garbage...), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write(tc.frame); err != nil {
				t.Fatal(err)
			}
			body, err := readFrame(c)
			if tc.check == nil {
				if !closedByServer(err) {
					t.Fatalf("want the connection closed, read %d bytes, %v", len(body), err)
				}
				return
			}
			if err != nil {
				t.Fatalf("want an answer: %v", err)
			}
			tc.check(t, body)
		})
	}
	ping("after the bad input")

	// Pipelined: answers come back in request order, although produces
	// to partitions on other shards answer later than the ApiVersions
	// between them.
	kafkaCreate(t, t.Context(), kadm.NewClient(good), "pipe", 4, 1)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var frames []byte
	for corr := int32(1); corr <= 40; corr++ {
		var req kmsg.Request = kmsg.NewPtrApiVersionsRequest()
		if corr%2 == 0 {
			pr := kmsg.NewPtrProduceRequest()
			pr.Acks, pr.TimeoutMillis = -1, 10000
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = "pipe"
			rp := kmsg.NewProduceRequestTopicPartition()
			rp.Partition, rp.Records = corr/2%4, kafkaOneBatch(t, fmt.Sprint("pipelined-", corr))
			rt.Partitions = append(rt.Partitions, rp)
			pr.Topics = append(pr.Topics, rt)
			req = pr
		}
		frames = append(frames, encoded(req, 9, corr)...)
	}
	if _, err := c.Write(frames); err != nil {
		t.Fatal(err)
	}
	for corr := uint32(1); corr <= 40; corr++ {
		body, err := readFrame(c)
		if err != nil {
			t.Fatalf("answer %d: %v", corr, err)
		}
		if got := binary.BigEndian.Uint32(body); got != corr {
			t.Fatalf("answer %d carries correlation id %d", corr, got)
		}
		if corr%2 == 0 {
			resp := kmsg.NewPtrProduceResponse()
			resp.SetVersion(9)
			if err := resp.ReadFrom(body[5:]); err != nil || resp.Topics[0].Partitions[0].ErrorCode != 0 {
				t.Fatalf("produce %d: %+v, %v", corr, resp, err)
			}
		}
	}
}

// kafkaOneBatch is a RecordBatch v2 of one record.
func kafkaOneBatch(t *testing.T, value string) []byte {
	b, err := batch.NewBuilder(batch.Options{})
	if err == nil {
		err = b.AppendKV(time.Now().UnixMilli(), nil, []byte(value))
	}
	if err != nil {
		t.Fatal(err)
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return out
}
