package wire

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzFrame feeds arbitrary bytes to the streaming readers, the header
// parsers and every body decoder. Nothing may panic; whatever decodes must
// encode back to the same bytes; whatever fails must fail with the precise
// error kind the server or client acts on.
func FuzzFrame(f *testing.F) {
	f.Add([]byte{})
	f.Add(be.AppendUint32(nil, FrameBytesMaxDefault))        // max length, body still to come
	f.Add(be.AppendUint32(nil, FrameBytesMaxDefault+1))      // over max
	f.Add(append(be.AppendUint32(nil, 0xFFFFFFFF), 0, 1, 2)) // huge
	f.Add(append(be.AppendUint32(nil, 3), 0, 1, 2))          // under the header
	var all []byte
	for i, r := range sampleRequests() {
		frame := AppendRequest(nil, uint32(i), 0, r)
		f.Add(frame)
		f.Add(append(append([]byte(nil), frame...), 0xDE, 0xAD, 0xBE, 0xEF, 0, 0, 0, 9)) // valid then garbage
		f.Add(r.AppendBody(nil, 0))                                                      // a bare body
		all = append(all, frame...)
	}
	f.Add(all)
	for i, r := range sampleResponses() {
		f.Add(AppendResponse(nil, uint32(i), 0, r))
	}
	f.Add(AppendErrorResponse(nil, 1, &ErrorResponse{Err: ErrNotPrimary, Message: "m",
		Hint: &Hint{NodeID: 2, Address: "a:1", Generation: 3}, RetryAfterMs: 9}))

	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRequestStream(t, data)
		fuzzResponseStream(t, data)
		for key := range APIKey(len(apiTable)) {
			fuzzRequestBody(t, key, data)
			fuzzResponseBody(t, key, data)
		}
	})
}

func fuzzRequestStream(t *testing.T, data []byte) {
	for rest := data; ; {
		frame, n, err := NextRequestFrame(rest, 0)
		if err != nil {
			if !errors.Is(err, ErrFrameTooLarge) && !errors.Is(err, ErrFrameTooShort) {
				t.Fatalf("framing error of unknown kind: %v", err)
			}
			return
		}
		if n == 0 {
			return
		}
		if n > len(rest) || len(frame) != n-SizeFieldBytes {
			t.Fatalf("n=%d with %d bytes, frame %d", n, len(rest), len(frame))
		}
		h, body, err := ParseRequestHeader(frame)
		if err != nil {
			t.Fatalf("ParseRequestHeader after NextRequestFrame: %v", err)
		}
		var answer []byte
		if err := h.Check(); err != nil {
			answer = AppendErrorResponse(nil, h.CorrelationID, err)
		} else {
			req := NewRequest(h.APIKey)
			if err := req.DecodeBody(body, h.APIVersion); err != nil {
				answer = AppendErrorResponse(nil, h.CorrelationID, err)
			} else if again := AppendRequest(nil, h.CorrelationID, h.APIVersion, req); !bytes.Equal(again, rest[:n]) {
				t.Fatalf("%s frame re-encodes differently:\n%x\n%x", h.APIKey, again, rest[:n])
			}
		}
		if answer != nil { // the error answer itself must be a valid response
			rf, rn, err := NextResponseFrame(answer, 0)
			if err != nil || rn != len(answer) {
				t.Fatalf("error answer does not frame: %v", err)
			}
			rh, rb, _ := ParseResponseHeader(rf)
			if rh.CorrelationID != h.CorrelationID || rh.ErrorCode == CodeNone {
				t.Fatalf("error answer header %+v", rh)
			}
			if _, err := DecodeErrorBody(rh.ErrorCode, rb); err != nil {
				t.Fatalf("error answer body: %v", err)
			}
		}
		rest = rest[n:]
	}
}

func fuzzResponseStream(t *testing.T, data []byte) {
	for rest := data; ; {
		frame, n, err := NextResponseFrame(rest, 0)
		if err != nil || n == 0 {
			return
		}
		h, body, err := ParseResponseHeader(frame)
		if err != nil {
			t.Fatalf("ParseResponseHeader after NextResponseFrame: %v", err)
		}
		if h.ErrorCode != CodeNone {
			er, err := DecodeErrorBody(h.ErrorCode, body)
			if err != nil {
				if !errors.Is(err, ErrMalformedResponse) {
					t.Fatalf("error body failure of the wrong kind: %v", err)
				}
			} else if again := AppendErrorResponse(nil, h.CorrelationID, er); !bytes.Equal(again, rest[:n]) {
				t.Fatalf("error response re-encodes differently:\n%x\n%x", again, rest[:n])
			}
		}
		rest = rest[n:]
	}
}

func fuzzRequestBody(t *testing.T, key APIKey, body []byte) {
	req := NewRequest(key)
	err := req.DecodeBody(body, 0)
	if err != nil {
		var er *ErrorResponse
		if !errors.As(err, &er) || er.Err != ErrInvalidRequest {
			t.Fatalf("%s request: failure is not INVALID_REQUEST: %v", key, err)
		}
		return
	}
	if again := req.AppendBody(nil, 0); !bytes.Equal(again, body) {
		t.Fatalf("%s request re-encodes differently:\n%x\n%x", key, again, body)
	}
	if topic, part, ok := PeekPartition(key, body); ok {
		var ref *PartitionRef
		switch r := req.(type) {
		case *ProduceRequest:
			ref = &r.PartitionRef
		case *FetchRequest:
			ref = &r.PartitionRef
		case *ListOffsetsRequest:
			ref = &r.PartitionRef
		}
		if string(topic) != ref.Topic || part != ref.Partition {
			t.Fatalf("PeekPartition %q/%d disagrees with %s/%d", topic, part, ref.Topic, ref.Partition)
		}
	}
}

func fuzzResponseBody(t *testing.T, key APIKey, body []byte) {
	resp := NewResponse(key)
	if err := resp.DecodeBody(body, 0); err != nil {
		if !errors.Is(err, ErrMalformedResponse) {
			t.Fatalf("%s response: failure of the wrong kind: %v", key, err)
		}
		return
	}
	if again := resp.AppendBody(nil, 0); !bytes.Equal(again, body) {
		t.Fatalf("%s response re-encodes differently:\n%x\n%x", key, again, body)
	}
}
