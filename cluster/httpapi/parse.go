package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corestream/corestream/netio/wire"
)

// Strict parsing of HTTP requests. Nothing is guessed: a query parameter
// the route does not know, a repeated one, a number that is not a decimal
// integer in its range, an enum value outside its set, a JSON field the
// body does not have, trailing data after the body, or a string that is
// not base64 where base64 is expected is refused with INVALID_REQUEST (or
// the more precise wire code) and a message that names the parameter and
// what it accepts. Apart from readBody these functions are pure: they
// take the parsed URL or the body bytes and return values or an error.

// BodyBytesMax bounds a request body (16 MiB: a produce's batch is at
// most wire.RecordsBytesMax, and base64 makes JSON larger than its bytes,
// so a body at this bound still builds a batch within the wire's).
const BodyBytesMax = 16 << 20

// readBody reads r's body, at most BodyBytesMax bytes within timeout
// (a client that stops mid-body would otherwise hold its connection and
// a goroutine for ever). A longer body is MESSAGE_TOO_LARGE (413), a slower
// one REQUEST_TIMED_OUT (408).
func readBody(w http.ResponseWriter, r *http.Request, timeout time.Duration) ([]byte, error) {
	rc := http.NewResponseController(w)
	deadline := rc.SetReadDeadline(time.Now().Add(timeout)) == nil
	b, err := io.ReadAll(io.LimitReader(r.Body, BodyBytesMax+1))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// The deadline stays: the server reads what is left of the body
		// before it answers, and must give up on that too.
		return nil, &httpStatusError{status: http.StatusRequestTimeout,
			err: wire.Errorf(wire.ErrRequestTimedOut, "the request body did not arrive within %v (%d bytes came)", timeout, len(b))}
	}
	if deadline {
		// Cleared, so that nothing else on the connection (a long poll's
		// wait for the client to go) inherits it.
		rc.SetReadDeadline(time.Time{})
	}
	if err != nil {
		return nil, wire.Errorf(wire.ErrInvalidRequest, "reading the request body: %v", err)
	}
	if len(b) > BodyBytesMax {
		return nil, wire.Errorf(wire.ErrMessageTooLarge, "the request body is over %d bytes (the HTTP API's limit); send fewer records per request", BodyBytesMax)
	}
	return b, nil
}

// checkQuery refuses a query parameter not in accepted and one given more
// than once.
func checkQuery(q url.Values, accepted ...string) error {
	for _, k := range slices.Sorted(maps.Keys(q)) {
		if !slices.Contains(accepted, k) {
			if len(accepted) == 0 {
				return wire.Errorf(wire.ErrInvalidRequest, "query parameter %q is unknown: this route takes no query parameters", k)
			}
			return wire.Errorf(wire.ErrInvalidRequest, "query parameter %q is unknown (accepted: %s)", k, strings.Join(accepted, ", "))
		}
		if len(q[k]) > 1 {
			return wire.Errorf(wire.ErrInvalidRequest, "query parameter %q is given %d times; give it once", k, len(q[k]))
		}
	}
	return nil
}

// queryInt reads the decimal integer parameter name in lo..hi, or def
// when it is absent.
func queryInt(q url.Values, name string, def, lo, hi int64) (int64, error) {
	s, ok := q[name]
	if !ok {
		return def, nil
	}
	v, err := parseDecimal(s[0], lo, hi)
	if err != nil {
		return 0, wire.Errorf(wire.ErrInvalidRequest, "query parameter %q: %v", name, err)
	}
	return v, nil
}

// parseDecimal parses s as a decimal integer (digits with an optional
// leading '-': no '+', spaces, hex or exponent) in lo..hi.
func parseDecimal(s string, lo, hi int64) (int64, error) {
	digits := strings.TrimPrefix(s, "-")
	ok := digits != ""
	for i := 0; i < len(digits) && ok; i++ {
		ok = digits[i] >= '0' && digits[i] <= '9'
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if !ok || err != nil || v < lo || v > hi {
		return 0, fmt.Errorf("%q is not a decimal integer in %d..%d", s, lo, hi)
	}
	return v, nil
}

// queryEnum reads the parameter name, one of values, or def when absent.
func queryEnum(q url.Values, name, def string, values ...string) (string, error) {
	s, ok := q[name]
	if !ok {
		return def, nil
	}
	if !slices.Contains(values, s[0]) {
		return "", wire.Errorf(wire.ErrInvalidRequest, "query parameter %q: %q is not one of %s", name, s[0], strings.Join(values, ", "))
	}
	return s[0], nil
}

// decodeBody decodes the JSON object body into v (a pointer to a struct):
// unknown fields, a value of the wrong type, a body that is not one JSON
// object, and data after it are refused, naming the field and listing
// the accepted ones.
func decodeBody(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return wire.Errorf(wire.ErrInvalidRequest, "the request body is empty; send a JSON object with the fields %s", strings.Join(jsonFields(v), ", "))
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return bodyError(err, v)
	}
	if _, err := dec.Token(); err != io.EOF {
		return wire.Errorf(wire.ErrInvalidRequest, "the request body has data after its JSON object")
	}
	return nil
}

// bodyError turns an encoding/json error into a precise INVALID_REQUEST.
func bodyError(err error, v any) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return wire.Errorf(wire.ErrInvalidRequest, "the request body is not valid JSON at byte %d: %v", syn.Offset, err)
	case errors.As(err, &typ) && typ.Field == "":
		return wire.Errorf(wire.ErrInvalidRequest, "the request body is a JSON %s; send a JSON object with the fields %s", typ.Value, strings.Join(jsonFields(v), ", "))
	case errors.As(err, &typ):
		return wire.Errorf(wire.ErrInvalidRequest, "body field %q: got a JSON %s, want %s", typ.Field, typ.Value, jsonKind(typ.Type))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return wire.Errorf(wire.ErrInvalidRequest, "the request body ends inside its JSON object")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		// encoding/json has no type for this error; its text is stable.
		return wire.Errorf(wire.ErrInvalidRequest, "body field %s is unknown (accepted: %s)",
			strings.TrimPrefix(err.Error(), "json: unknown field "), strings.Join(jsonFields(v), ", "))
	}
	return wire.Errorf(wire.ErrInvalidRequest, "the request body: %v", err)
}

// jsonKind names what a Go type accepts, in JSON's words.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Int:
		bits := t.Bits()
		return fmt.Sprintf("an integer in %d..%d", int64(-1)<<(bits-1), int64(1)<<(bits-1)-1)
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uint:
		return fmt.Sprintf("an integer in 0..%d", uint64(1)<<t.Bits()-1)
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonKind(t.Elem()) + " or null"
	}
	return t.String()
}

// jsonFields lists the json names of the struct v points to, with those
// of nested structs as parent.child and parent[].child.
func jsonFields(v any) []string {
	return appendJSONFields(nil, "", reflect.TypeOf(v), 0)
}

func appendJSONFields(dst []string, prefix string, t reflect.Type, depth int) []string {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		if t.Kind() == reflect.Slice {
			prefix += "[]"
		}
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || depth > 4 { // bounded: our bodies nest two levels
		return dst
	}
	if prefix != "" {
		prefix += "."
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			dst = append(dst, prefix+name)
			dst = appendJSONFields(dst, prefix+name, f.Type, depth+1)
		}
	}
	return dst
}

// decodeBytes decodes one binary field of a record given either as
// base64 (field) or as UTF-8 text (field_text), never both. Neither (or
// JSON null) is a null value: nil.
func decodeBytes(where string, b64, text *string) ([]byte, error) {
	switch {
	case b64 != nil && text != nil:
		return nil, wire.Errorf(wire.ErrInvalidRequest, "%s and %s_text are both given; give one (base64 or text)", where, where)
	case text != nil:
		return []byte(*text), nil
	case b64 != nil:
		b, err := base64.StdEncoding.Strict().DecodeString(*b64)
		if err != nil {
			return nil, wire.Errorf(wire.ErrInvalidRequest, "%s is not base64 (RFC 4648 standard alphabet, with padding): %v; send text as %s_text", where, err, where)
		}
		if b == nil {
			b = []byte{}
		}
		return b, nil
	}
	return nil, nil
}

// encodeBytes is the base64 of b, or nil (JSON null) for a null b.
func encodeBytes(b []byte) *string {
	if b == nil {
		return nil
	}
	s := base64.StdEncoding.EncodeToString(b)
	return &s
}

// pathPartition parses the {partition} path segment: a decimal integer
// in 0..PartitionsPerTopicMax-1.
func pathPartition(s string) (int32, error) {
	p, err := parseDecimal(s, 0, wire.PartitionsPerTopicMax-1)
	if err != nil {
		return 0, wire.Errorf(wire.ErrInvalidRequest, "partition in the path: %v", err)
	}
	return int32(p), nil
}
