package wire

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestNextFrame(t *testing.T) {
	one := AppendRequest(nil, 1, 0, &ListTopicsRequest{}) // 14 bytes
	two := AppendRequest(append([]byte(nil), one...), 2, 0, &DescribeTopicRequest{Name: "a"})
	sized := func(size uint32, extra int) []byte { return append(be.AppendUint32(nil, size), make([]byte, extra)...) }
	cases := []struct {
		name    string
		buf     []byte
		max     int
		n       int
		wantErr error
		msg     string
	}{
		{"empty", nil, 0, 0, nil, ""},
		{"partial size", one[:3], 0, 0, nil, ""},
		{"header only partly", one[:10], 0, 0, nil, ""},
		{"exact", one, 0, len(one), nil, ""},
		{"two frames take the first", two, 0, len(one), nil, ""},
		{"size at max waits", sized(FrameBytesMaxDefault, 10), 0, 0, nil, ""},
		{"size over max", sized(FrameBytesMaxDefault+1, 0), 0, 0, ErrFrameTooLarge,
			"wire: frame too large: size field 16842753 exceeds the maximum 16842752"},
		{"huge size", sized(0xFFFFFFFF, 0), 0, 0, ErrFrameTooLarge,
			"wire: frame too large: size field 4294967295 exceeds the maximum 16842752"},
		{"custom max", sized(101, 0), 100, 0, ErrFrameTooLarge,
			"wire: frame too large: size field 101 exceeds the maximum 100"},
		{"size below header", sized(9, 9), 0, 0, ErrFrameTooShort,
			"wire: frame too short: size field 9 is below the 10-byte header"},
		{"zero size", sized(0, 0), 0, 0, ErrFrameTooShort,
			"wire: frame too short: size field 0 is below the 10-byte header"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			frame, n, err := NextRequestFrame(c.buf, c.max)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) || err.Error() != c.msg || frame != nil || n != 0 {
					t.Fatalf("got %q n=%d err=%v, want %s", frame, n, err, c.msg)
				}
				return
			}
			if err != nil || n != c.n {
				t.Fatalf("n=%d err=%v, want n=%d", n, err, c.n)
			}
			if n > 0 && !bytes.Equal(frame, c.buf[SizeFieldBytes:n]) {
				t.Fatal("frame is not the bytes after the size field")
			}
			if n == 0 && frame != nil {
				t.Fatal("need-more must return a nil frame")
			}
		})
	}
	// Responses have a 6-byte header.
	if _, _, err := NextResponseFrame(sized(5, 5), 0); !errors.Is(err, ErrFrameTooShort) {
		t.Fatalf("response size 5: %v", err)
	}
	if f, n, err := NextResponseFrame(sized(6, 6), 0); err != nil || n != 10 || len(f) != 6 {
		t.Fatalf("response size 6: %d %v", n, err)
	}
}

// TestStreamByteAtATime feeds a pipelined stream of every sample request
// one byte at a time, as a slow socket would, and checks every frame comes
// out whole and in order.
func TestStreamByteAtATime(t *testing.T) {
	var stream []byte
	reqs := sampleRequests()
	for i, r := range reqs {
		stream = AppendRequest(stream, uint32(i), 0, r)
	}
	var buf []byte
	got := 0
	for _, b := range stream {
		buf = append(buf, b)
		for {
			frame, n, err := NextRequestFrame(buf, 0)
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			h, body, _ := ParseRequestHeader(frame)
			if h.CorrelationID != uint32(got) || h.APIKey != reqs[got].APIKey() {
				t.Fatalf("frame %d: header %+v", got, h)
			}
			dec := NewRequest(h.APIKey)
			if err := dec.DecodeBody(body, 0); err != nil || !reflect.DeepEqual(dec, reqs[got]) {
				t.Fatalf("frame %d: %v", got, err)
			}
			buf = buf[n:]
			got++
		}
	}
	if got != len(reqs) || len(buf) != 0 {
		t.Fatalf("%d frames of %d, %d bytes left", got, len(reqs), len(buf))
	}
}

func TestRequestHeaderCheck(t *testing.T) {
	cases := []struct {
		h    RequestHeader
		want *Error
		msg  string
	}{
		{RequestHeader{APIKey: APIFetch}, nil, ""},
		{RequestHeader{APIKey: 77}, ErrUnsupportedVersion, "unknown API key 77 (this server knows 0..31)"},
		{RequestHeader{APIKey: APIProduce, APIVersion: 3}, ErrUnsupportedVersion, "Produce version 3 is outside the supported range 0..0"},
		{RequestHeader{APIKey: APIProduce, Flags: 4}, ErrInvalidRequest, "Produce request: unknown header flags 0x0004"},
	}
	for _, c := range cases {
		err := c.h.Check()
		if c.want == nil {
			if err != nil {
				t.Errorf("%+v: %v", c.h, err)
			}
			continue
		}
		var er *ErrorResponse
		if !errors.As(err, &er) || er.Err != c.want || er.Message != c.msg {
			t.Errorf("%+v: got %v, want %s: %s", c.h, err, c.want.Name, c.msg)
		}
	}
	if _, _, err := ParseRequestHeader(make([]byte, 9)); !errors.Is(err, ErrFrameTooShort) {
		t.Fatal(err)
	}
	if _, _, err := ParseResponseHeader(make([]byte, 5)); !errors.Is(err, ErrFrameTooShort) {
		t.Fatal(err)
	}
}

// TestUnsupportedVersionAnswer walks the server path for a well-formed
// frame with an unknown API key: the answer is an UNSUPPORTED_VERSION error
// response carrying the request's correlation id.
func TestUnsupportedVersionAnswer(t *testing.T) {
	in := AppendRequestHeader(nil, RequestHeader{APIKey: 200, APIVersion: 1, CorrelationID: 99}, 3)
	in = append(in, 1, 2, 3)
	frame, _, err := NextRequestFrame(in, 0)
	if err != nil {
		t.Fatal(err)
	}
	h, _, _ := ParseRequestHeader(frame)
	out := AppendErrorResponse(nil, h.CorrelationID, h.Check())
	rf, n, err := NextResponseFrame(out, 0)
	if err != nil || n != len(out) {
		t.Fatal(err)
	}
	rh, body, _ := ParseResponseHeader(rf)
	if rh != (ResponseHeader{CorrelationID: 99, ErrorCode: ErrUnsupportedVersion.Code}) {
		t.Fatalf("%+v", rh)
	}
	err = DecodeResponseBody(rh, body, 0, new(FetchResponse))
	if !errors.Is(err, ErrUnsupportedVersion) || err.Error() != "UNSUPPORTED_VERSION: unknown API key 200 (this server knows 0..31)" {
		t.Fatal(err)
	}
}

func TestErrorResponseRoundTrip(t *testing.T) {
	cases := []struct {
		in   error
		want ErrorResponse
	}{
		{&ErrorResponse{Err: ErrNotPrimary, Message: "orders/3 is led by node 2",
			Hint: &Hint{NodeID: 2, Address: "10.0.0.2:7070", Generation: 8}},
			ErrorResponse{Err: ErrNotPrimary, Message: "orders/3 is led by node 2",
				Hint: &Hint{NodeID: 2, Address: "10.0.0.2:7070", Generation: 8}}},
		{&ErrorResponse{Err: ErrBusy, Message: "inbox full", RetryAfterMs: 50},
			ErrorResponse{Err: ErrBusy, Message: "inbox full", RetryAfterMs: 50}},
		{ErrStaleGeneration, ErrorResponse{Err: ErrStaleGeneration, Message: ErrStaleGeneration.Description}},
		{fmt.Errorf("append: %w", ErrStorageError), ErrorResponse{Err: ErrStorageError, Message: "append: " + ErrStorageError.Error()}},
		{errors.New("disk on fire"), ErrorResponse{Err: ErrUnknownServerError, Message: "disk on fire"}},
		{fmt.Errorf("shard 2: %w", Errorf(ErrOffsetOutOfRange, "offset 5 < log start 10")),
			ErrorResponse{Err: ErrOffsetOutOfRange, Message: "offset 5 < log start 10"}},
	}
	for _, c := range cases {
		frame := AppendErrorResponse(nil, 7, c.in)
		f, _, err := NextResponseFrame(frame, 0)
		if err != nil {
			t.Fatal(err)
		}
		h, body, _ := ParseResponseHeader(f)
		if h.CorrelationID != 7 || h.ErrorCode != c.want.Err.Code {
			t.Fatalf("%v: header %+v", c.in, h)
		}
		got, err := DecodeErrorBody(h.ErrorCode, body)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(*got, c.want) {
			t.Fatalf("%v:\n got %+v\nwant %+v", c.in, got, c.want)
		}
		if !errors.Is(got, c.want.Err) {
			t.Fatal("decoded error does not match its table entry")
		}
		if again := got.AppendBody(nil); !bytes.Equal(again, body) {
			t.Fatal("error body does not re-encode to the same bytes")
		}
	}
	er := &ErrorResponse{Err: ErrNotPrimary, Message: "m", Hint: &Hint{NodeID: 2, Address: "h:1", Generation: 8}, RetryAfterMs: 5}
	if s := er.Error(); s != `NOT_PRIMARY: m (hint: node 2 at "h:1", generation 8) (retry after 5 ms)` {
		t.Fatal(s)
	}
}

func TestErrorMessageTruncated(t *testing.T) {
	msg := strings.Repeat("a", ErrorMessageBytesMax-1) + "é" // é straddles the bound
	body := (&ErrorResponse{Err: ErrInvalidConfig, Message: msg}).AppendBody(nil)
	got, err := DecodeErrorBody(ErrInvalidConfig.Code, body)
	if err != nil {
		t.Fatal(err)
	}
	if got.Message != msg[:ErrorMessageBytesMax-1] {
		t.Fatalf("truncated to %d bytes", len(got.Message))
	}
}

func TestDecodeErrorBodyRejects(t *testing.T) {
	good := (&ErrorResponse{Err: ErrBusy, Message: "x"}).AppendBody(nil)
	if _, err := DecodeErrorBody(CodeNone, good); !errors.Is(err, ErrMalformedResponse) {
		t.Fatalf("code 0: %v", err)
	}
	bad := append([]byte(nil), good...)
	bad[len(bad)-1] = 2 // has_hint
	_, err := DecodeErrorBody(ErrBusy.Code, bad)
	if !errors.Is(err, ErrMalformedResponse) ||
		err.Error() != "wire: malformed response: error body v0: field has_hint at byte 7: bool is 2, want 0 or 1" {
		t.Fatal(err)
	}
	// A code this client does not know keeps its number.
	er, err := DecodeErrorBody(999, good)
	if err != nil || er.Err.Code != 999 || !errors.Is(er, &Error{Code: 999}) {
		t.Fatalf("%v %v", er, err)
	}
}

// TestFetchResponseHeaderMatches checks that header-then-records, the
// sendfile path, produces exactly the frame AppendResponse produces.
func TestFetchResponseHeaderMatches(t *testing.T) {
	for _, recs := range [][]byte{nil, {1}, sampleBatch} {
		want := AppendResponse(nil, 42, 0, &FetchResponse{HighWatermark: 200, LogStartOffset: 10, Records: recs})
		got := AppendFetchResponseHeader(nil, 42, 0, 200, 10, NodeNone, len(recs))
		if len(got) != FetchResponseHeaderBytes {
			t.Fatalf("header is %d bytes, want %d", len(got), FetchResponseHeaderBytes)
		}
		got = append(got, recs...)
		if !bytes.Equal(got, want) {
			t.Fatalf("records %d: header path differs\n%x\n%x", len(recs), got, want)
		}
	}
}

// TestMaxFrame round-trips a produce whose records fill RecordsBytesMax:
// the frame must fit the default maximum.
func TestMaxFrame(t *testing.T) {
	req := &ProduceRequest{PartitionRef: PartitionRef{Topic: strings.Repeat("t", TopicNameBytesMax), Generation: -1},
		Records: make([]byte, RecordsBytesMax)}
	frame := AppendRequest(nil, 1, 0, req)
	f, n, err := NextRequestFrame(frame, 0)
	if err != nil || n != len(frame) {
		t.Fatalf("max produce frame (%d bytes): %v", len(frame), err)
	}
	_, body, _ := ParseRequestHeader(f)
	var got ProduceRequest
	if err := got.DecodeBody(body, 0); err != nil || len(got.Records) != RecordsBytesMax {
		t.Fatal(err)
	}
	resp := AppendFetchResponseHeader(nil, 1, 0, 0, 0, NodeNone, RecordsBytesMax)
	if size := be.Uint32(resp); size > FrameBytesMaxDefault {
		t.Fatalf("max fetch response size %d over the frame maximum", size)
	}
}

// TestStringOverBound: an encoder given a string past its bound produces a
// frame the decoder rejects, never a different valid request.
func TestStringOverBound(t *testing.T) {
	for _, n := range []int{TopicNameBytesMax + 1, 0xFFFF, 0x10000, 0x10005} {
		body := (&DescribeTopicRequest{Name: strings.Repeat("a", n)}).AppendBody(nil, 0)
		if err := new(DescribeTopicRequest).DecodeBody(body, 0); !errors.Is(err, ErrInvalidRequest) {
			t.Fatalf("name of %d bytes: %v", n, err)
		}
	}
}
