// Package wire is corestream's client protocol: the frame format, the API
// keys and versions, every request and response body, and the one table of
// error codes. It is a codec only — no sockets, no business rules — shared by
// the broker's network layer, the Go client and the tools. The whole
// protocol, for client authors in any language, is docs/protocol.md; its
// tables are generated from this package.
//
// Frames (big-endian; these layouts never change within protocol version 1):
//
//	request                                 response
//	 0  size            uint32               0  size            uint32
//	 4  api_key         uint16               4  correlation_id  uint32
//	 6  api_version     uint16               8  error_code      int16
//	 8  correlation_id  uint32              10  body: the API's response body
//	12  flags           uint16 (0)               when error_code is 0, else the
//	14  body                                     error body (message, retry
//	                                             advice, routing hint)
//
// size counts the bytes after itself and is bounded by the reader's
// maximum (FrameBytesMaxDefault). Every body must be consumed exactly.
// There is no frame checksum: TCP checksums segments and every record batch
// carries its own CRC-32C end to end (see docs/protocol.md).
//
// # Server loop
//
//	frame, n, err := wire.NextRequestFrame(buf, frameBytesMax)
//	// err: close the connection. n == 0: read more. Else:
//	h, body, _ := wire.ParseRequestHeader(frame)
//	if err := h.Check(); err != nil {
//		out = wire.AppendErrorResponse(out, h.CorrelationID, err) // UNSUPPORTED_VERSION…
//	}
//	topic, partition, ok := wire.PeekPartition(h.APIKey, body) // pick the shard
//	var req wire.ProduceRequest
//	if err := req.DecodeBody(body, h.APIVersion); err != nil {
//		out = wire.AppendErrorResponse(out, h.CorrelationID, err) // INVALID_REQUEST, names the field
//	}
//	buf = buf[n:] // only once req.Records is no longer needed
//
// Fetch responses are written as AppendFetchResponseHeader followed by the
// records, so the records can go out with sendfile.
//
// # Allocation and lifetimes
//
// The produce and fetch paths allocate nothing beyond what the caller
// supplies: encoders append to a caller's buffer, and decoders fill a
// caller's struct. Byte-slice fields of a decoded body (ProduceRequest.Records,
// FetchResponse.Records) alias the frame: they are valid only while the
// frame's buffer is neither reused nor modified. String fields are copied,
// except that a decoder keeps a struct's existing string when the bytes are
// equal, so decoding repeatedly into one struct for the same topic does not
// allocate. Slice fields of admin bodies reuse the struct's capacity.
//
// # Errors
//
// Wire error codes are *Error values (ErrNotPrimary, …) in one table
// (Errors); errors.Is matches by code. A response with a non-zero code
// decodes to an *ErrorResponse carrying the precise message and, for routing
// errors, a Hint; it unwraps to its *Error. Request decoders return
// *ErrorResponse with INVALID_REQUEST; response decoders return errors
// wrapping ErrMalformedResponse; the streaming readers return
// ErrFrameTooLarge or ErrFrameTooShort, after which the connection is closed.
package wire
