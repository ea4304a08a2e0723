package wire

import (
	"encoding/hex"
	"fmt"
)

// TopicID identifies a topic's history: a random UUID fixed when the topic
// is created. A topic deleted and created again under the same name gets a
// new id, so a request carrying the old id cannot touch the new topic. The
// zero TopicID in a request means "unknown to the client; do not check".
type TopicID [16]byte

// IsZero reports whether id is the zero (unchecked) id.
func (id TopicID) IsZero() bool { return id == TopicID{} }

// String renders the canonical UUID form, 8-4-4-4-12 lower-case hex.
func (id TopicID) String() string {
	var b [36]byte
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:36], id[10:16])
	return string(b[:])
}

// ParseTopicID parses the canonical UUID form that String renders (either
// case).
func ParseTopicID(s string) (TopicID, error) {
	var id TopicID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return id, fmt.Errorf("wire: topic id %q is not of the form xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", s)
	}
	hexDigits := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:36]
	if _, err := hex.Decode(id[:], []byte(hexDigits)); err != nil {
		return TopicID{}, fmt.Errorf("wire: topic id %q: %v", s, err)
	}
	return id, nil
}

// ValidateTopicName checks Kafka's topic naming rule: 1..249 bytes, each
// one of [a-zA-Z0-9._-], and not "." or "..". Client and broker both call
// it. The error is an *ErrorResponse with INVALID_TOPIC_NAME saying which
// rule failed.
func ValidateTopicName(name string) error {
	return validateName(ErrInvalidTopicName, "topic", name, TopicNameBytesMax)
}

// ValidateConsumerName applies the topic naming rule to a consumer name;
// the error carries INVALID_CONSUMER_NAME.
func ValidateConsumerName(name string) error {
	return validateName(ErrInvalidConsumerName, "consumer", name, ConsumerNameBytesMax)
}

func validateName(code *Error, kind, name string, max int) error {
	switch {
	case name == "":
		return Errorf(code, "%s name is empty", kind)
	case len(name) > max:
		return Errorf(code, "%s name is %d bytes, the maximum is %d", kind, len(name), max)
	case name == "." || name == "..":
		return Errorf(code, "%s name may not be %q", kind, name)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !nameByte(c) {
			shown := fmt.Sprintf("%#02x", c)
			if c >= 0x20 && c < 0x7f {
				shown = fmt.Sprintf("%q", c)
			}
			return Errorf(code, "%s name %q has byte %s at %d; allowed: a-z A-Z 0-9 . _ -", kind, name, shown, i)
		}
	}
	return nil
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}
