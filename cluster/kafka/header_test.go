package kafka

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// frame is a request frame body (no length): Kafka's header for req at
// version v, then req's body.
func frame(req kmsg.Request, v int16, corr int32, clientID *string) []byte {
	req.SetVersion(v)
	b := kbin.AppendInt16(nil, req.Key())
	b = kbin.AppendInt16(b, v)
	b = kbin.AppendInt32(b, corr)
	b = kbin.AppendNullableString(b, clientID)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	return req.AppendTo(b)
}

func TestParseHeader(t *testing.T) {
	id := "client-1"
	md := kmsg.NewPtrMetadataRequest()
	md.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("t")}}
	flexible := frame(md, 12, 42, &id)
	// A flexible header with one tagged field the listener skips.
	hl := 2 + 2 + 4 + 2 + len(id) // up to the tagged fields
	tagged := append(append([]byte(nil), flexible[:hl]...), 1, 5, 2, 0xaa, 0xbb)
	tagged = append(tagged, flexible[hl+1:]...)
	for _, tc := range []struct {
		name    string
		in      []byte
		key     int16
		version int16
		client  string
		err     error
	}{
		{"flexible", flexible, 3, 12, id, nil},
		{"tagged fields skipped", tagged, 3, 12, id, nil},
		{"not flexible, null client id", frame(kmsg.NewPtrMetadataRequest(), 4, 1, nil), 3, 4, "", nil},
		{"empty", nil, 0, 0, "", ErrShortHeader},
		{"cut in the client id", flexible[:12], 3, 12, "", ErrBadHeader},
		{"tags past the end", append(append([]byte(nil), flexible[:hl]...), 3, 1), 3, 12, id, ErrBadHeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, req, body, err := parseHeader(tc.in)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			if h.Key != tc.key || h.Version != tc.version || h.ClientID != tc.client || req == nil {
				t.Fatalf("header %+v, request %T", h, req)
			}
			if err := req.ReadFrom(body); err != nil {
				t.Fatalf("body: %v", err)
			}
		})
	}
}

// An API or version not served gets its response with a top-level error
// only when that version carries one; otherwise the connection closes.
func TestErrorResponse(t *testing.T) {
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.SetVersion(1)
	if r := errorResponse(fc, kerr.UnsupportedVersion.Code); r == nil {
		t.Fatal("FindCoordinator v1 has an error code")
	}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(3) // ErrorCode is v7+
	if r := errorResponse(fetch, kerr.UnsupportedVersion.Code); r != nil {
		t.Fatal("Fetch v3 carries no top-level error code")
	}
	pr := kmsg.NewPtrProduceRequest()
	pr.SetVersion(2)
	if r := errorResponse(pr, kerr.UnsupportedVersion.Code); r != nil {
		t.Fatal("Produce has no top-level error code")
	}
	fetch.SetVersion(99)
	if r := errorResponse(fetch, 35); r != nil {
		t.Fatal("a version kmsg cannot encode")
	}
}

// FuzzRequestDecode feeds the header parser and kmsg's decoders anything:
// they must return errors, never panic, and a header that parses
// re-encodes to the same prefix.
func FuzzRequestDecode(f *testing.F) {
	id := "fuzz"
	f.Add([]byte{})
	f.Add(make([]byte, requestHeaderBytesMin))
	f.Add(frame(kmsg.NewPtrApiVersionsRequest(), 3, 1, &id))
	f.Add(frame(kmsg.NewPtrMetadataRequest(), 12, 2, nil))
	f.Add(append(frame(kmsg.NewPtrProduceRequest(), 9, 3, &id), 0xff, 0xff, 0xff, 0xff))
	f.Add(append(frame(kmsg.NewPtrFetchRequest(), 12, 4, &id), 0xde, 0xad))
	f.Add(frame(kmsg.NewPtrCreateTopicsRequest(), 7, 5, &id))
	big := frame(kmsg.NewPtrProduceRequest(), 9, 6, &id)
	f.Add(append(big, make([]byte, 64<<10)...))
	f.Fuzz(func(t *testing.T, in []byte) {
		h, req, body, err := parseHeader(in)
		if err != nil {
			return
		}
		again := kbin.AppendInt16(nil, h.Key)
		again = kbin.AppendInt16(again, h.Version)
		again = kbin.AppendInt32(again, h.CorrelationID)
		if string(in[:len(again)]) != string(again) {
			t.Fatalf("header %+v does not re-encode to %x", h, in[:len(again)])
		}
		if req != nil && h.Version >= 0 && h.Version <= req.MaxVersion() {
			_ = req.ReadFrom(append([]byte(nil), body...))
		}
	})
}
