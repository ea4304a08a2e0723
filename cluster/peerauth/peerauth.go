// Package peerauth is the node-to-node handshake: mutual challenge–response
// authentication with the cluster secret (the secret never crosses the
// wire), and the compatibility checks every replication connection must
// pass (server version and K, the replica connections per peer).
//
// Exchange, on every new replication connection (dialer D, listener L):
//
//	D → L  Hello      {version, node, K, conn index, D's nonce}
//	L → D  Challenge  {version, node, K, L's nonce, L's proof}   or Refusal
//	D → L  Proof      {D's proof}                                or Refusal
//	L → D  Welcome                                               or Refusal
//
// A proof is HMAC-SHA256(secret, role ‖ both nonces ‖ both node ids ‖ K ‖
// conn index ‖ version), so a proof is useless on another connection, in
// the other direction, or with other parameters. Each side checks the
// other's proof and parameters and refuses with a Refusal that states both
// values; both sides log it. Message bodies are framed by the caller
// (length-prefixed); this package only encodes, decodes and decides.
package peerauth

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// Message kinds. Values are the format; never change.
const (
	KindHello     byte = 1
	KindChallenge byte = 2
	KindProof     byte = 3
	KindWelcome   byte = 4
	KindRefusal   byte = 5
)

// Magic opens every handshake message, so a stray client connecting to a
// replication port is recognised at once.
var Magic = [4]byte{'C', 'S', 'P', 'R'}

// ProtocolVersion is the version of this handshake's encoding.
const ProtocolVersion = 1

// NonceBytes is the size of each side's nonce.
const NonceBytes = 32

// VersionBytesMax bounds the server version string.
const VersionBytesMax = 64

// Errors. A refusal carries its reason as text; errors.Is tells the kind.
var (
	// ErrMalformed is returned for bytes that are not a handshake message.
	ErrMalformed = errors.New("peerauth: malformed handshake message")
	// ErrAuth is returned when a proof does not verify (another secret).
	ErrAuth = errors.New("peerauth: authentication failed")
	// ErrIncompatible is returned when version or K differ.
	ErrIncompatible = errors.New("peerauth: incompatible peer")
	// ErrRefused is returned when the other side refused; the message is its reason.
	ErrRefused = errors.New("peerauth: refused by peer")
)

// Params describe one side of a connection.
type Params struct {
	// Version is the server version; both sides must run the same.
	Version string
	// Node is the sender's node id.
	Node int32
	// K is cluster.coordinator.replica_connections_per_peer.
	K int32
	// ConnIndex is which of the K connections this is (set by the dialer).
	ConnIndex int32
}

// Hello is the dialer's opening message.
type Hello struct {
	Params
	Nonce [NonceBytes]byte
}

// Challenge is the listener's answer to a Hello.
type Challenge struct {
	Params
	Nonce [NonceBytes]byte
	Proof [sha256.Size]byte
}

// NewNonce returns a fresh random nonce.
func NewNonce() [NonceBytes]byte {
	var n [NonceBytes]byte
	if _, err := rand.Read(n[:]); err != nil {
		panic(fmt.Sprintf("peerauth: no randomness: %v", err))
	}
	return n
}

// Compatible checks that the peer's version and K match ours; the error
// names both values.
func Compatible(ours, theirs Params) error {
	if ours.Version != theirs.Version {
		return fmt.Errorf("%w: server version %q here, %q on node %d", ErrIncompatible, ours.Version, theirs.Version, theirs.Node)
	}
	if ours.K != theirs.K {
		return fmt.Errorf("%w: cluster.coordinator.replica_connections_per_peer is %d here, %d on node %d", ErrIncompatible, ours.K, theirs.K, theirs.Node)
	}
	return nil
}

// proof binds the secret to everything about this connection.
func proof(secret []byte, role string, dialer, listener Params, dn, ln [NonceBytes]byte) [sha256.Size]byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(role))
	m.Write(dn[:])
	m.Write(ln[:])
	var b [16]byte
	binary.BigEndian.PutUint32(b[0:], uint32(dialer.Node))
	binary.BigEndian.PutUint32(b[4:], uint32(listener.Node))
	binary.BigEndian.PutUint32(b[8:], uint32(dialer.K))
	binary.BigEndian.PutUint32(b[12:], uint32(dialer.ConnIndex))
	m.Write(b[:])
	m.Write([]byte(dialer.Version))
	var out [sha256.Size]byte
	copy(out[:], m.Sum(nil))
	return out
}

// ListenerProof is the proof the listener sends in its Challenge.
func ListenerProof(secret []byte, h Hello, listener Params, ln [NonceBytes]byte) [sha256.Size]byte {
	return proof(secret, "listener", h.Params, listener, h.Nonce, ln)
}

// DialerProof is the proof the dialer sends after checking the Challenge.
func DialerProof(secret []byte, h Hello, c Challenge) [sha256.Size]byte {
	return proof(secret, "dialer", h.Params, c.Params, h.Nonce, c.Nonce)
}

// VerifyChallenge is the dialer's check of the listener's answer.
func VerifyChallenge(secret []byte, h Hello, c Challenge) error {
	if err := Compatible(h.Params, c.Params); err != nil {
		return err
	}
	want := ListenerProof(secret, h, c.Params, c.Nonce)
	if !hmac.Equal(want[:], c.Proof[:]) {
		return fmt.Errorf("%w: node %d does not know this cluster's secret", ErrAuth, c.Node)
	}
	return nil
}

// VerifyProof is the listener's check of the dialer's proof.
func VerifyProof(secret []byte, h Hello, c Challenge, got [sha256.Size]byte) error {
	want := DialerProof(secret, h, c)
	if !hmac.Equal(want[:], got[:]) {
		return fmt.Errorf("%w: node %d does not know this cluster's secret", ErrAuth, h.Node)
	}
	return nil
}

// Encoding: magic(4) kind(1) protocol version(1) then the kind's fields.

func header(kind byte) []byte {
	b := make([]byte, 0, 128)
	b = append(b, Magic[:]...)
	return append(b, kind, ProtocolVersion)
}

func appendParams(b []byte, p Params) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(p.Node))
	b = binary.BigEndian.AppendUint32(b, uint32(p.K))
	b = binary.BigEndian.AppendUint32(b, uint32(p.ConnIndex))
	b = append(b, byte(len(p.Version)))
	return append(b, p.Version...)
}

// EncodeHello encodes h.
func EncodeHello(h Hello) []byte {
	return append(appendParams(header(KindHello), h.Params), h.Nonce[:]...)
}

// EncodeChallenge encodes c.
func EncodeChallenge(c Challenge) []byte {
	b := append(appendParams(header(KindChallenge), c.Params), c.Nonce[:]...)
	return append(b, c.Proof[:]...)
}

// EncodeProof encodes the dialer's proof.
func EncodeProof(p [sha256.Size]byte) []byte { return append(header(KindProof), p[:]...) }

// EncodeWelcome encodes the listener's acceptance.
func EncodeWelcome() []byte { return header(KindWelcome) }

// EncodeRefusal encodes a refusal with its reason (truncated to 1 KiB).
func EncodeRefusal(reason string) []byte {
	if len(reason) > 1024 {
		reason = reason[:1024]
	}
	b := binary.BigEndian.AppendUint16(header(KindRefusal), uint16(len(reason)))
	return append(b, reason...)
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil || len(r.b) < n {
		r.err = ErrMalformed
		return make([]byte, n)
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) params() Params {
	var p Params
	p.Node = int32(binary.BigEndian.Uint32(r.take(4)))
	p.K = int32(binary.BigEndian.Uint32(r.take(4)))
	p.ConnIndex = int32(binary.BigEndian.Uint32(r.take(4)))
	n := int(r.take(1)[0])
	if n > VersionBytesMax {
		r.err = ErrMalformed
	}
	p.Version = string(r.take(n))
	return p
}

// Decode parses any handshake message and returns its kind and value: a
// Hello, a Challenge, a [32]byte proof, nil (welcome), or, for a refusal,
// an error wrapping ErrRefused with the peer's reason.
func Decode(b []byte) (byte, any, error) {
	r := &reader{b: b}
	if !bytes.Equal(r.take(4), Magic[:]) {
		return 0, nil, fmt.Errorf("%w: not a corestream replication handshake", ErrMalformed)
	}
	kind := r.take(1)[0]
	if v := r.take(1)[0]; r.err == nil && v != ProtocolVersion {
		return kind, nil, fmt.Errorf("%w: handshake protocol version %d here, %d from the peer", ErrIncompatible, ProtocolVersion, v)
	}
	var v any
	switch kind {
	case KindHello:
		h := Hello{Params: r.params()}
		copy(h.Nonce[:], r.take(NonceBytes))
		v = h
	case KindChallenge:
		c := Challenge{Params: r.params()}
		copy(c.Nonce[:], r.take(NonceBytes))
		copy(c.Proof[:], r.take(sha256.Size))
		v = c
	case KindProof:
		var p [sha256.Size]byte
		copy(p[:], r.take(sha256.Size))
		v = p
	case KindWelcome:
	case KindRefusal:
		n := int(binary.BigEndian.Uint16(r.take(2)))
		reason := string(r.take(n))
		if r.err == nil && len(r.b) == 0 {
			return kind, nil, fmt.Errorf("%w: %s", ErrRefused, reason)
		}
	default:
		return kind, nil, fmt.Errorf("%w: unknown kind %d", ErrMalformed, kind)
	}
	if r.err != nil {
		return kind, nil, r.err
	}
	if len(r.b) != 0 {
		return kind, nil, fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(r.b))
	}
	return kind, v, nil
}
