// Package peerauth is the node-to-node handshake: mutual challenge–response
// authentication with the cluster secret (the secret never crosses the
// wire), the proof that both nodes share the HTTP API's http.jwt_secret
// (which signs forwarded requests and login tokens: a node with another
// one would join and then fail every request forwarded to or from it),
// and the compatibility checks every replication connection must pass
// (server version, K, the replica connections per peer, and the cluster
// id each side's data directory records).
//
// Exchange, on every new replication connection (dialer D, listener L):
//
//	D → L  Hello      {version, node, K, conn index, cluster, D's nonce}
//	L → D  Challenge  {version, node, K, cluster, L's nonce, L's proofs}  or Refusal
//	D → L  Proof      {D's proofs}                               or Refusal
//	L → D  Welcome                                               or Refusal
//
// A proof is HMAC-SHA256(secret, role ‖ both nonces ‖ both node ids ‖ K ‖
// conn index ‖ version ‖ both cluster ids), so a proof is useless on another connection, in
// the other direction, or with other parameters. Each side sends two
// proofs, the same HMAC keyed once with the cluster secret and once with
// http.jwt_secret (role prefixed "http "), so that a refusal can say
// which secret differs without either crossing the wire. Each side checks the
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

// ProtocolVersion is the version of this handshake's encoding. Version 2
// added the http.jwt_secret proofs, version 3 the cluster id in Params;
// nodes must run the same server version anyway (Compatible), so there
// is no fallback to an older one.
const ProtocolVersion = 3

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
	// Cluster is the cluster id recorded in the sender's data directory
	// (zero: not learned yet, a new node). Two nodes that both know one
	// must know the same (Compatible).
	Cluster [16]byte
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
	// Proof is keyed with the cluster secret, HTTPProof with
	// http.jwt_secret.
	Proof, HTTPProof [sha256.Size]byte
}

// Proofs are the dialer's two proofs (the Proof message).
type Proofs struct {
	Cluster, HTTP [sha256.Size]byte
}

// Secrets are what the proofs are keyed with.
type Secrets struct {
	// Cluster is cluster.secret; HTTP is http.jwt_secret ("" on a node
	// without one: then every peer must have none too).
	Cluster, HTTP []byte
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
	if ours.Cluster != ([16]byte{}) && theirs.Cluster != ([16]byte{}) && ours.Cluster != theirs.Cluster {
		return fmt.Errorf("%w: this node's data directory belongs to cluster %s, node %d's to cluster %s: one of them was started on another cluster's data directory (or with another cluster's roster)",
			ErrIncompatible, uuidText(ours.Cluster), theirs.Node, uuidText(theirs.Cluster))
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
	m.Write(dialer.Cluster[:])
	m.Write(listener.Cluster[:])
	var out [sha256.Size]byte
	copy(out[:], m.Sum(nil))
	return out
}

// ListenerProof is the cluster-secret proof the listener sends in its
// Challenge.
func ListenerProof(secret []byte, h Hello, listener Params, ln [NonceBytes]byte) [sha256.Size]byte {
	return proof(secret, "listener", h.Params, listener, h.Nonce, ln)
}

// NewChallenge is the listener's Challenge to h, with both proofs.
func NewChallenge(s Secrets, h Hello, listener Params, ln [NonceBytes]byte) Challenge {
	return Challenge{Params: listener, Nonce: ln, Proof: ListenerProof(s.Cluster, h, listener, ln),
		HTTPProof: proof(s.HTTP, "http listener", h.Params, listener, h.Nonce, ln)}
}

// DialerProofs are the proofs the dialer sends after checking the
// Challenge.
func DialerProofs(s Secrets, h Hello, c Challenge) Proofs {
	return Proofs{Cluster: proof(s.Cluster, "dialer", h.Params, c.Params, h.Nonce, c.Nonce),
		HTTP: proof(s.HTTP, "http dialer", h.Params, c.Params, h.Nonce, c.Nonce)}
}

// VerifyChallenge is the dialer's check of the listener's answer.
func VerifyChallenge(s Secrets, h Hello, c Challenge) error {
	if err := Compatible(h.Params, c.Params); err != nil {
		return err
	}
	want := NewChallenge(s, h, c.Params, c.Nonce)
	if !hmac.Equal(want.Proof[:], c.Proof[:]) {
		return fmt.Errorf("%w: node %d does not know this cluster's secret (cluster.secret differs)", ErrAuth, c.Node)
	}
	if !hmac.Equal(want.HTTPProof[:], c.HTTPProof[:]) {
		return httpMismatch(h.Node, c.Node)
	}
	return nil
}

// VerifyProof is the listener's check of the dialer's proofs.
func VerifyProof(s Secrets, h Hello, c Challenge, got Proofs) error {
	want := DialerProofs(s, h, c)
	if !hmac.Equal(want.Cluster[:], got.Cluster[:]) {
		return fmt.Errorf("%w: node %d does not know this cluster's secret (cluster.secret differs)", ErrAuth, h.Node)
	}
	if !hmac.Equal(want.HTTP[:], got.HTTP[:]) {
		return httpMismatch(c.Node, h.Node)
	}
	return nil
}

func httpMismatch(self, peer int32) error {
	return fmt.Errorf("%w: node %d's http.jwt_secret differs from node %d's (or one of them has none): every node must share it, or HTTP requests forwarded between them and login tokens issued by one would be refused by the other",
		ErrAuth, peer, self)
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
	b = append(b, p.Version...)
	return append(b, p.Cluster[:]...)
}

// uuidText renders a cluster id as canonical UUID text.
func uuidText(id [16]byte) string {
	return fmt.Sprintf("%x-%x-%x-%x-%x", id[0:4], id[4:6], id[6:8], id[8:10], id[10:16])
}

// EncodeHello encodes h.
func EncodeHello(h Hello) []byte {
	return append(appendParams(header(KindHello), h.Params), h.Nonce[:]...)
}

// EncodeChallenge encodes c.
func EncodeChallenge(c Challenge) []byte {
	b := append(appendParams(header(KindChallenge), c.Params), c.Nonce[:]...)
	b = append(b, c.Proof[:]...)
	return append(b, c.HTTPProof[:]...)
}

// EncodeProof encodes the dialer's proofs.
func EncodeProof(p Proofs) []byte {
	return append(append(header(KindProof), p.Cluster[:]...), p.HTTP[:]...)
}

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
	copy(p.Cluster[:], r.take(16))
	return p
}

// Decode parses any handshake message and returns its kind and value: a
// Hello, a Challenge, Proofs, nil (welcome), or, for a refusal,
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
		copy(c.HTTPProof[:], r.take(sha256.Size))
		v = c
	case KindProof:
		var p Proofs
		copy(p.Cluster[:], r.take(sha256.Size))
		copy(p.HTTP[:], r.take(sha256.Size))
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
