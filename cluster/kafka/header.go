package kafka

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Errors of request framing. A connection whose request header cannot be
// read is closed: nothing after it can be trusted.
var (
	// ErrShortHeader: a frame too short for Kafka's request header.
	ErrShortHeader = errors.New("kafka: request header cut short")
	// ErrBadHeader: a header whose client id or tagged fields do not parse.
	ErrBadHeader = errors.New("kafka: malformed request header")
)

// RequestHeader is Kafka's request header (v1, or v2 for flexible
// versions, which adds tagged fields).
//
//	api_key         int16
//	api_version     int16
//	correlation_id  int32
//	client_id       nullable string (int16 length, never compact)
//	tagged_fields   (flexible versions only)
type RequestHeader struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      string
}

// requestHeaderBytesMin is the fixed part: key, version, correlation id,
// and the client id's length.
const requestHeaderBytesMin = 10

// parseHeader splits a frame into its header and body. req is a fresh
// request of the header's key and version, nil when kmsg does not know
// the key (the caller answers that). The body aliases frame.
func parseHeader(frame []byte) (h RequestHeader, req kmsg.Request, body []byte, err error) {
	if len(frame) < requestHeaderBytesMin {
		return h, nil, nil, fmt.Errorf("%w: %d bytes, need at least %d", ErrShortHeader, len(frame), requestHeaderBytesMin)
	}
	r := kbin.Reader{Src: frame}
	h.Key, h.Version, h.CorrelationID = r.Int16(), r.Int16(), r.Int32()
	if id := r.UnsafeNullableString(); id != nil {
		h.ClientID = string([]byte(*id))
	}
	if !r.Ok() {
		return h, nil, nil, fmt.Errorf("%w: the client id runs past the frame", ErrBadHeader)
	}
	req = kmsg.RequestForKey(h.Key)
	if req == nil {
		return h, nil, r.Src, nil
	}
	req.SetVersion(h.Version)
	if req.IsFlexible() {
		// Header v2: tagged fields, which carry nothing we use.
		for n := r.Uvarint(); n > 0 && r.Ok(); n-- {
			r.Uvarint()
			r.Span(int(r.Uvarint()))
		}
		if !r.Ok() {
			return h, nil, nil, fmt.Errorf("%w: tagged fields run past the frame", ErrBadHeader)
		}
	}
	return h, req, r.Src, nil
}

// appendResponseHeader starts a response frame: a placeholder for the
// length (filled by finishFrame), the correlation id, and for flexible
// responses an empty tag section. ApiVersions always answers with
// header v0, so a client that does not know our versions can read it.
func appendResponseHeader(dst []byte, h RequestHeader, flexible bool) []byte {
	dst = append(dst, 0, 0, 0, 0)
	dst = kbin.AppendInt32(dst, h.CorrelationID)
	if flexible && h.Key != apiVersionsKey {
		dst = append(dst, 0)
	}
	return dst
}

// finishFrame writes the frame's length into its first four bytes.
func finishFrame(frame []byte) []byte {
	n := uint32(len(frame) - 4)
	frame[0], frame[1], frame[2], frame[3] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	return frame
}

// encodeResponse is a whole response frame for resp.
func encodeResponse(h RequestHeader, resp kmsg.Response) []byte {
	resp.SetVersion(h.Version)
	out := appendResponseHeader(make([]byte, 0, 256), h, resp.IsFlexible())
	return finishFrame(resp.AppendTo(out))
}
