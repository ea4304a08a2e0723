package wire

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// Frame layout sizes, in bytes. These are the format: never change.
const (
	// SizeFieldBytes is the length prefix of every frame.
	SizeFieldBytes = 4
	// RequestHeaderBytes is the request header after the size field:
	// api key, api version, correlation id, flags.
	RequestHeaderBytes = 10
	// ResponseHeaderBytes is the response header after the size field:
	// correlation id, error code.
	ResponseHeaderBytes = 6
)

// Protocol versions, agreed by the handshake. The frame headers above are
// those of protocol version 1; the handshake frame keeps them in every
// future version so that any client and server can agree.
const (
	ProtocolVersionMin uint16 = 1
	ProtocolVersionMax uint16 = 1
)

// Framing errors. The stream cannot be resynchronised after one, so the
// reader of the stream closes the connection. Returned errors wrap them with
// the numbers.
var (
	// ErrFrameTooLarge is returned when a size field exceeds the reader's
	// maximum frame size.
	ErrFrameTooLarge = errors.New("wire: frame too large")
	// ErrFrameTooShort is returned when a size field is smaller than the
	// frame header that must follow it.
	ErrFrameTooShort = errors.New("wire: frame too short")
	// ErrMalformedResponse is wrapped by every error decoding a response:
	// the server broke the protocol, and the client closes the connection.
	ErrMalformedResponse = errors.New("wire: malformed response")
)

// RequestHeader is the header of a request frame.
type RequestHeader struct {
	// APIKey selects the request type.
	APIKey APIKey
	// APIVersion selects the body layout; see CheckVersion.
	APIVersion uint16
	// CorrelationID is chosen by the client and echoed in the response; a
	// client keeps it unique among its requests in flight.
	CorrelationID uint32
	// Flags is reserved: 0 in protocol version 1; any bit set is answered
	// with INVALID_REQUEST.
	Flags uint16
}

// ResponseHeader is the header of a response frame.
type ResponseHeader struct {
	// CorrelationID echoes the request's.
	CorrelationID uint32
	// ErrorCode is CodeNone when the body is the API's response body, and
	// otherwise the code of the error body that follows.
	ErrorCode int16
}

// NextRequestFrame finds the first complete request frame in buf, which
// holds bytes read from a connection, starting at a frame boundary.
//
//   - A complete frame: frame is the bytes after the size field (header
//     and body, aliasing buf) and n = SizeFieldBytes+len(frame) is the
//     number of bytes it used.
//   - An incomplete frame: frame is nil, n is 0 and err is nil; call again
//     when more bytes have arrived.
//   - A framing error (ErrFrameTooLarge, ErrFrameTooShort): close the
//     connection. The size is checked as soon as its 4 bytes are there,
//     before the body arrives.
//
// frameBytesMax bounds the size field; 0 means FrameBytesMaxDefault. It
// does not allocate except to build an error.
func NextRequestFrame(buf []byte, frameBytesMax int) (frame []byte, n int, err error) {
	return nextFrame(buf, RequestHeaderBytes, frameBytesMax)
}

// NextResponseFrame is NextRequestFrame for a client reading responses.
func NextResponseFrame(buf []byte, frameBytesMax int) (frame []byte, n int, err error) {
	return nextFrame(buf, ResponseHeaderBytes, frameBytesMax)
}

func nextFrame(buf []byte, headerBytes, frameBytesMax int) ([]byte, int, error) {
	if frameBytesMax <= 0 {
		frameBytesMax = FrameBytesMaxDefault
	}
	if len(buf) < SizeFieldBytes {
		return nil, 0, nil
	}
	size := uint64(be.Uint32(buf))
	if size > uint64(frameBytesMax) {
		return nil, 0, fmt.Errorf("%w: size field %d exceeds the maximum %d", ErrFrameTooLarge, size, frameBytesMax)
	}
	if size < uint64(headerBytes) {
		return nil, 0, fmt.Errorf("%w: size field %d is below the %d-byte header", ErrFrameTooShort, size, headerBytes)
	}
	end := SizeFieldBytes + int(size)
	if len(buf) < end {
		return nil, 0, nil
	}
	return buf[SizeFieldBytes:end:end], end, nil
}

// ParseRequestHeader splits a frame from NextRequestFrame into its header
// and body (aliasing frame). The only error is ErrFrameTooShort.
func ParseRequestHeader(frame []byte) (RequestHeader, []byte, error) {
	if len(frame) < RequestHeaderBytes {
		return RequestHeader{}, nil, fmt.Errorf("%w: %d bytes, header needs %d", ErrFrameTooShort, len(frame), RequestHeaderBytes)
	}
	h := RequestHeader{
		APIKey:        APIKey(be.Uint16(frame[0:])),
		APIVersion:    be.Uint16(frame[2:]),
		CorrelationID: be.Uint32(frame[4:]),
		Flags:         be.Uint16(frame[8:]),
	}
	return h, frame[RequestHeaderBytes:], nil
}

// Check returns nil when the server can decode the request's body, and
// otherwise the *ErrorResponse to send back (UNSUPPORTED_VERSION for an
// unknown key or version, INVALID_REQUEST for unknown flags). The
// connection stays open: the frame itself was well-formed.
func (h RequestHeader) Check() error {
	if err := CheckVersion(h.APIKey, h.APIVersion); err != nil {
		return err
	}
	if h.Flags != 0 {
		return Errorf(ErrInvalidRequest, "%s request: unknown header flags %#04x", h.APIKey, h.Flags)
	}
	return nil
}

// ParseResponseHeader splits a frame from NextResponseFrame into its header
// and body (aliasing frame).
func ParseResponseHeader(frame []byte) (ResponseHeader, []byte, error) {
	if len(frame) < ResponseHeaderBytes {
		return ResponseHeader{}, nil, fmt.Errorf("%w: %d bytes, header needs %d", ErrFrameTooShort, len(frame), ResponseHeaderBytes)
	}
	h := ResponseHeader{
		CorrelationID: be.Uint32(frame[0:]),
		ErrorCode:     int16(be.Uint16(frame[4:])),
	}
	return h, frame[ResponseHeaderBytes:], nil
}

// DecodeResponseBody decodes the body of a response whose header is h into
// resp when h carries no error. When it does, it decodes the error body and
// returns it as an *ErrorResponse (resp is untouched). Other errors wrap
// ErrMalformedResponse.
func DecodeResponseBody(h ResponseHeader, body []byte, version uint16, resp Response) error {
	if h.ErrorCode == CodeNone {
		return resp.DecodeBody(body, version)
	}
	er, err := DecodeErrorBody(h.ErrorCode, body)
	if err != nil {
		return err
	}
	return er
}

// beginFrame appends a size placeholder; endFrame patches it.
func beginFrame(dst []byte) ([]byte, int) {
	return append(dst, 0, 0, 0, 0), len(dst)
}

func endFrame(dst []byte, start int) []byte {
	be.PutUint32(dst[start:], uint32(len(dst)-start-SizeFieldBytes))
	return dst
}

// AppendRequestHeader appends a request's size field and header for a body
// of bodyLen bytes, which the caller appends next.
func AppendRequestHeader(dst []byte, h RequestHeader, bodyLen int) []byte {
	dst = be.AppendUint32(dst, uint32(RequestHeaderBytes+bodyLen))
	dst = be.AppendUint16(dst, uint16(h.APIKey))
	dst = be.AppendUint16(dst, h.APIVersion)
	dst = be.AppendUint32(dst, h.CorrelationID)
	return be.AppendUint16(dst, h.Flags)
}

// AppendRequest appends a whole request frame for req, with the given
// correlation id and version and no flags. It allocates only if dst must grow.
// REQUIRES: version is supported for req.APIKey().
func AppendRequest(dst []byte, correlationID uint32, version uint16, req Request) []byte {
	dst, start := beginFrame(dst)
	dst = be.AppendUint16(dst, uint16(req.APIKey()))
	dst = be.AppendUint16(dst, version)
	dst = be.AppendUint32(dst, correlationID)
	dst = be.AppendUint16(dst, 0)
	dst = req.AppendBody(dst, version)
	return endFrame(dst, start)
}

// AppendResponseHeader appends a response's size field and header for a
// body of bodyLen bytes, which the caller appends (or sends) next.
func AppendResponseHeader(dst []byte, h ResponseHeader, bodyLen int) []byte {
	dst = be.AppendUint32(dst, uint32(ResponseHeaderBytes+bodyLen))
	dst = be.AppendUint32(dst, h.CorrelationID)
	return be.AppendUint16(dst, uint16(h.ErrorCode))
}

// AppendResponse appends a whole successful response frame for resp.
// REQUIRES: version is the request's version.
func AppendResponse(dst []byte, correlationID uint32, version uint16, resp Response) []byte {
	dst, start := beginFrame(dst)
	dst = be.AppendUint32(dst, correlationID)
	dst = be.AppendUint16(dst, uint16(CodeNone))
	dst = resp.AppendBody(dst, version)
	return endFrame(dst, start)
}

// AppendErrorResponse appends a whole error response frame for err: an
// *ErrorResponse in its chain is sent as is; an *Error is sent with its
// text; any other error is sent as UNKNOWN_SERVER_ERROR with its text.
// REQUIRES: err != nil.
func AppendErrorResponse(dst []byte, correlationID uint32, err error) []byte {
	er := asErrorResponse(err)
	dst, start := beginFrame(dst)
	dst = be.AppendUint32(dst, correlationID)
	dst = be.AppendUint16(dst, uint16(er.Err.Code))
	dst = er.AppendBody(dst)
	return endFrame(dst, start)
}

// Error body layout, after a response header whose error code is not NONE:
//
//	message          string   at most ErrorMessageBytesMax bytes
//	retry_after_ms   uint32   0 = no advice
//	has_hint         bool
//	if has_hint:
//	  hint_node_id     int32  -1 = unknown
//	  hint_generation  int32  -1 = unknown
//	  hint_address     string at most AddressBytesMax bytes

// AppendBody appends the error body. A message longer than
// ErrorMessageBytesMax is cut at a UTF-8 boundary at or below the bound.
func (e *ErrorResponse) AppendBody(dst []byte) []byte {
	msg := e.Message
	if len(msg) > ErrorMessageBytesMax {
		cut := ErrorMessageBytesMax
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut]
	}
	dst = appendString(dst, msg)
	dst = be.AppendUint32(dst, e.RetryAfterMs)
	dst = appendBool(dst, e.Hint != nil)
	if h := e.Hint; h != nil {
		dst = be.AppendUint32(dst, uint32(h.NodeID))
		dst = be.AppendUint32(dst, uint32(h.Generation))
		dst = appendString(dst, h.Address)
	}
	return dst
}

// DecodeErrorBody decodes the error body of a response with error code
// code. Errors wrap ErrMalformedResponse.
func DecodeErrorBody(code int16, body []byte) (*ErrorResponse, error) {
	d := decoder{b: body, response: true, key: apiError}
	e := &ErrorResponse{}
	if code == CodeNone {
		d.failf("error_code", "error body with error code 0")
	}
	e.Err, _ = ErrorForCode(code).(*Error)
	d.str("message", ErrorMessageBytesMax, &e.Message)
	e.RetryAfterMs = d.u32("retry_after_ms")
	if d.boolean("has_hint") {
		h := &Hint{NodeID: d.i32("hint_node_id"), Generation: d.i32("hint_generation")}
		d.str("hint_address", AddressBytesMax, &h.Address)
		e.Hint = h
	}
	if err := d.done(); err != nil {
		return nil, err
	}
	return e, nil
}

// apiError names the error body in decode errors.
const apiError APIKey = 0xFFFF
