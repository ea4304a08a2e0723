// Package scram is SCRAM-SHA-256 (RFC 5802, RFC 7677) without channel
// binding, as the native protocol's Authenticate exchange (and the Kafka
// listener's SASL SCRAM) runs it: the credential a password is stored as
// (salted, iterated, never the password), and each side of the exchange
// as a small state machine that reads no clock and draws its nonces from
// the reader it is given. Both the server (cluster) and the Go SDK
// (client) use it, which is why it lives with the protocol.
package scram

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"strconv"
	"strings"
)

// Bounds and defaults of stored credentials.
const (
	// IterationsDefault is the PBKDF2 iteration count new credentials
	// get (RFC 7677 asks for at least 4096).
	IterationsDefault = 4096
	// IterationsMin and IterationsMax bound a credential's iterations:
	// fewer makes guessing cheap, more makes every login a denial of
	// service on the node.
	IterationsMin = 4096
	IterationsMax = 1 << 20
	// SaltBytes is the length of a new credential's random salt.
	SaltBytes = 16
	// NonceBytes is the length of each side's random nonce.
	NonceBytes = 18
	// PasswordBytesMax and UsernameBytesMax bound what a client may send.
	PasswordBytesMax = 1024
	UsernameBytesMax = 128
	// scramMessageBytesMax bounds one SCRAM message.
	scramMessageBytesMax = 4096
)

// Errors of the SCRAM exchange and of credentials.
var (
	// ErrAuthFailed: the username or password is wrong (the two are not
	// told apart, so a client cannot probe for names).
	ErrAuthFailed = errors.New("scram: authentication failed: unknown user or wrong password")
	// ErrBadMessage: a SCRAM message breaks the protocol.
	ErrBadMessage = errors.New("scram: malformed SCRAM message")
	// ErrInvalidUsername: a username breaks the naming rule.
	ErrInvalidUsername = errors.New("scram: invalid username")
	// ErrInvalidPassword: a password is empty or too long.
	ErrInvalidPassword = errors.New("scram: invalid password")
)

// Mechanism is a SCRAM hash: SHA256 (the native protocol's, and Kafka's
// SCRAM-SHA-256) or SHA512 (Kafka's SCRAM-SHA-512).
type Mechanism struct {
	// Name is the SASL mechanism name.
	Name string
	hash func() hash.Hash
	size int
}

// The mechanisms.
var (
	SHA256 = &Mechanism{Name: "SCRAM-SHA-256", hash: sha256.New, size: sha256.Size}
	SHA512 = &Mechanism{Name: "SCRAM-SHA-512", hash: sha512.New, size: sha512.Size}
)

func (m *Mechanism) sum(b []byte) []byte {
	h := m.hash()
	h.Write(b)
	return h.Sum(nil)
}

func (m *Mechanism) mac(key []byte, msg string) []byte {
	h := hmac.New(m.hash, key)
	h.Write([]byte(msg))
	return h.Sum(nil)
}

// Credential is what the cluster stores of a password: the SCRAM stored
// and server keys (RFC 5802 §3), from which the password cannot be
// recovered except by guessing, each guess costing Iterations rounds.
type Credential struct {
	Salt       []byte `json:"salt"`
	Iterations int    `json:"iterations"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
}

// Valid reports whether c could have come from NewCredential.
func (c Credential) Valid() error { return SHA256.Valid(c) }

// Valid reports whether c could have come from m.NewCredential.
func (m *Mechanism) Valid(c Credential) error {
	if len(c.Salt) == 0 || c.Iterations < IterationsMin || c.Iterations > IterationsMax ||
		len(c.StoredKey) != m.size || len(c.ServerKey) != m.size {
		return fmt.Errorf("%w: a %s credential needs a salt, %d..%d iterations and %d-byte keys", ErrInvalidPassword, m.Name, IterationsMin, IterationsMax, m.size)
	}
	return nil
}

// ValidateUsername applies the naming rule: 1..UsernameBytesMax bytes of
// [a-zA-Z0-9._@-]. SCRAM's ',' and '=' never need escaping then.
func ValidateUsername(name string) error {
	if name == "" || len(name) > UsernameBytesMax {
		return fmt.Errorf("%w: %q must have 1..%d bytes", ErrInvalidUsername, name, UsernameBytesMax)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' || r == '@') {
			return fmt.Errorf("%w: %q may hold only letters, digits and . _ - @", ErrInvalidUsername, name)
		}
	}
	return nil
}

// ValidatePassword refuses an empty or too long password.
func ValidatePassword(pw string) error {
	if pw == "" || len(pw) > PasswordBytesMax {
		return fmt.Errorf("%w: a password must have 1..%d bytes", ErrInvalidPassword, PasswordBytesMax)
	}
	return nil
}

// NewCredential derives the stored SHA-256 credential of password with
// a salt read from rnd.
func NewCredential(password string, iterations int, rnd io.Reader) (Credential, error) {
	return SHA256.NewCredential(password, iterations, rnd)
}

// NewCredential derives the stored credential of password with a salt
// read from rnd.
func (m *Mechanism) NewCredential(password string, iterations int, rnd io.Reader) (Credential, error) {
	if err := ValidatePassword(password); err != nil {
		return Credential{}, err
	}
	salt := make([]byte, SaltBytes)
	if _, err := io.ReadFull(rnd, salt); err != nil {
		return Credential{}, fmt.Errorf("scram: drawing a salt: %w", err)
	}
	return m.DeriveCredential(password, salt, iterations)
}

// DeriveCredential is the SHA-256 credential of password with salt.
func DeriveCredential(password string, salt []byte, iterations int) (Credential, error) {
	return SHA256.DeriveCredential(password, salt, iterations)
}

// DeriveCredential is the credential of password with salt.
func (m *Mechanism) DeriveCredential(password string, salt []byte, iterations int) (Credential, error) {
	if iterations < IterationsMin || iterations > IterationsMax {
		return Credential{}, fmt.Errorf("%w: %d iterations is outside %d..%d", ErrInvalidPassword, iterations, IterationsMin, IterationsMax)
	}
	salted, err := pbkdf2.Key(m.hash, password, salt, iterations, m.size)
	if err != nil {
		return Credential{}, fmt.Errorf("scram: pbkdf2: %w", err)
	}
	return m.CredentialFromSalted(salted, salt, iterations)
}

// Verify checks password against c, a SHA-256 credential, in constant
// time; PLAIN logins (HTTP and Kafka's SASL PLAIN) use it.
func (c Credential) Verify(password string) bool { return SHA256.Verify(c, password) }

// Verify checks password against c, a credential of m, in constant time.
func (m *Mechanism) Verify(c Credential, password string) bool {
	d, err := m.DeriveCredential(password, c.Salt, c.Iterations)
	return err == nil && subtle.ConstantTimeCompare(d.StoredKey, c.StoredKey) == 1
}

// CredentialFromSalted is the credential of a password the client has
// already salted and iterated (SaltedPassword of RFC 5802, as Kafka's
// AlterUserScramCredentials sends it), so the password itself never
// reaches the server. salted must be m's hash size.
func (m *Mechanism) CredentialFromSalted(salted, salt []byte, iterations int) (Credential, error) {
	if len(salted) != m.size || len(salt) == 0 || iterations < IterationsMin || iterations > IterationsMax {
		return Credential{}, fmt.Errorf("%w: a %s salted password has %d bytes, a salt and %d..%d iterations", ErrInvalidPassword, m.Name, m.size, IterationsMin, IterationsMax)
	}
	ck := m.mac(salted, "Client Key")
	return Credential{Salt: append([]byte(nil), salt...), Iterations: iterations, StoredKey: m.sum(ck), ServerKey: m.mac(salted, "Server Key")}, nil
}

// Lookup finds a user's credential; ok is false for an unknown user.
type Lookup func(user string) (c Credential, ok bool)

// ServerConversation is the server's side of one SCRAM exchange:
// First answers the client's first message, Final its final one. It is
// used once.
type ServerConversation struct {
	m      *Mechanism
	lookup Lookup
	rnd    io.Reader
	// step: 0 before First, 1 after, 2 done.
	step        int
	user        string
	cred        Credential
	known       bool
	nonce       string
	clientBare  string
	serverFirst string
}

// NewServerConversation starts a SHA-256 exchange; nonces come from rnd.
func NewServerConversation(lookup Lookup, rnd io.Reader) *ServerConversation {
	return SHA256.NewServerConversation(lookup, rnd)
}

// NewServerConversation starts an exchange of m; lookup must answer m's
// credentials. Nonces come from rnd.
func (m *Mechanism) NewServerConversation(lookup Lookup, rnd io.Reader) *ServerConversation {
	return &ServerConversation{m: m, lookup: lookup, rnd: rnd}
}

// First takes "n,,n=user,r=nonce" and returns the server-first message.
// An unknown user gets a plausible answer (a salt derived from the name)
// and fails at Final, so the answer does not tell names apart.
func (s *ServerConversation) First(clientFirst string) (string, error) {
	if s.step != 0 || len(clientFirst) > scramMessageBytesMax {
		return "", fmt.Errorf("%w: unexpected client-first", ErrBadMessage)
	}
	s.step = 1
	rest, ok := strings.CutPrefix(clientFirst, "n,,")
	if !ok {
		return "", fmt.Errorf("%w: the GS2 header must be \"n,,\" (no channel binding, no authzid)", ErrBadMessage)
	}
	attrs, err := parseAttrs(rest, "n", "r")
	if err != nil {
		return "", err
	}
	s.user, s.clientBare = attrs["n"], rest
	if ValidateUsername(s.user) != nil {
		return "", ErrAuthFailed
	}
	s.cred, s.known = s.lookup(s.user)
	if !s.known {
		salt := sha256.Sum256([]byte("unknown user " + s.m.Name + s.user))
		s.cred = Credential{Salt: salt[:SaltBytes], Iterations: IterationsDefault}
	}
	nb := make([]byte, NonceBytes)
	if _, err := io.ReadFull(s.rnd, nb); err != nil {
		return "", fmt.Errorf("scram: drawing a nonce: %w", err)
	}
	s.nonce = attrs["r"] + base64.RawStdEncoding.EncodeToString(nb)
	s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(s.cred.Salt) + ",i=" + strconv.Itoa(s.cred.Iterations)
	return s.serverFirst, nil
}

// Final takes "c=biws,r=nonce,p=proof" and returns the server-final
// message and the authenticated user, or ErrAuthFailed.
func (s *ServerConversation) Final(clientFinal string) (serverFinal, user string, err error) {
	if s.step != 1 || len(clientFinal) > scramMessageBytesMax {
		return "", "", fmt.Errorf("%w: unexpected client-final", ErrBadMessage)
	}
	s.step = 2
	i := strings.LastIndex(clientFinal, ",p=")
	if i < 0 {
		return "", "", fmt.Errorf("%w: client-final without a proof", ErrBadMessage)
	}
	withoutProof := clientFinal[:i]
	attrs, err := parseAttrs(withoutProof, "c", "r")
	if err != nil {
		return "", "", err
	}
	// The nonce must end with the server's (which begins with the
	// client's), as Kafka's SCRAM server checks it: librdkafka 2.0 sends
	// its own nonce in front of the server's. The proof covers the
	// message as sent, so nothing else may vary.
	if attrs["c"] != "biws" || !strings.HasSuffix(attrs["r"], s.nonce) {
		return "", "", fmt.Errorf("%w: channel binding or nonce does not match", ErrBadMessage)
	}
	proof, err := base64.StdEncoding.DecodeString(clientFinal[i+3:])
	if err != nil || len(proof) != s.m.size {
		return "", "", fmt.Errorf("%w: proof is not %d bytes of base64", ErrBadMessage, s.m.size)
	}
	if !s.known {
		return "", "", ErrAuthFailed
	}
	auth := s.clientBare + "," + s.serverFirst + "," + withoutProof
	sig := s.m.mac(s.cred.StoredKey, auth)
	ck := make([]byte, len(proof))
	for j := range proof {
		ck[j] = proof[j] ^ sig[j]
	}
	if subtle.ConstantTimeCompare(s.m.sum(ck), s.cred.StoredKey) != 1 {
		return "", "", ErrAuthFailed
	}
	return "v=" + base64.StdEncoding.EncodeToString(s.m.mac(s.cred.ServerKey, auth)), s.user, nil
}

// ClientConversation is the client's side of one SCRAM exchange.
type ClientConversation struct {
	m              *Mechanism
	user, password string
	nonce          string
	bare           string
	serverSig      []byte
}

// NewClientConversation starts a SHA-256 exchange as user; the nonce
// comes from rnd.
func NewClientConversation(user, password string, rnd io.Reader) (*ClientConversation, error) {
	return SHA256.NewClientConversation(user, password, rnd)
}

// NewClientConversation starts an exchange of m as user; the nonce
// comes from rnd.
func (m *Mechanism) NewClientConversation(user, password string, rnd io.Reader) (*ClientConversation, error) {
	if err := ValidateUsername(user); err != nil {
		return nil, err
	}
	nb := make([]byte, NonceBytes)
	if _, err := io.ReadFull(rnd, nb); err != nil {
		return nil, fmt.Errorf("scram: drawing a nonce: %w", err)
	}
	c := &ClientConversation{m: m, user: user, password: password, nonce: base64.RawStdEncoding.EncodeToString(nb)}
	c.bare = "n=" + user + ",r=" + c.nonce
	return c, nil
}

// First is the client-first message.
func (c *ClientConversation) First() string { return "n,," + c.bare }

// Final answers the server-first message with the client-final one.
func (c *ClientConversation) Final(serverFirst string) (string, error) {
	attrs, err := parseAttrs(serverFirst, "r", "s", "i")
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(attrs["r"], c.nonce) || len(attrs["r"]) == len(c.nonce) {
		return "", fmt.Errorf("%w: the server's nonce does not extend ours", ErrBadMessage)
	}
	return c.final(serverFirst, attrs, attrs["r"])
}

// final is the client-final message of serverFirst (parsed into attrs)
// naming nonce as the exchange's.
func (c *ClientConversation) final(serverFirst string, attrs map[string]string, nonce string) (string, error) {
	salt, err := base64.StdEncoding.DecodeString(attrs["s"])
	if err != nil {
		return "", fmt.Errorf("%w: salt: %v", ErrBadMessage, err)
	}
	iter, err := strconv.Atoi(attrs["i"])
	if err != nil {
		return "", fmt.Errorf("%w: iterations: %v", ErrBadMessage, err)
	}
	// A downgrade (a server asking for few iterations) is refused by
	// DeriveCredential's lower bound.
	if iter < IterationsMin || iter > IterationsMax {
		return "", fmt.Errorf("%w: %d iterations is outside %d..%d", ErrBadMessage, iter, IterationsMin, IterationsMax)
	}
	salted, err := pbkdf2.Key(c.m.hash, c.password, salt, iter, c.m.size)
	if err != nil {
		return "", fmt.Errorf("scram: pbkdf2: %w", err)
	}
	m := c.m
	ck := m.mac(salted, "Client Key")
	stored := m.sum(ck)
	withoutProof := "c=biws,r=" + nonce
	auth := c.bare + "," + serverFirst + "," + withoutProof
	sig := m.mac(stored, auth)
	for j := range ck {
		ck[j] ^= sig[j]
	}
	c.serverSig = m.mac(m.mac(salted, "Server Key"), auth)
	return withoutProof + ",p=" + base64.StdEncoding.EncodeToString(ck), nil
}

// Verify checks the server-final message: the server proved it holds
// the credential too.
func (c *ClientConversation) Verify(serverFinal string) error {
	v, ok := strings.CutPrefix(serverFinal, "v=")
	got, err := base64.StdEncoding.DecodeString(v)
	if !ok || err != nil || c.serverSig == nil || !hmac.Equal(got, c.serverSig) {
		return fmt.Errorf("%w: the server's signature does not verify", ErrBadMessage)
	}
	return nil
}

// parseAttrs splits "k=v,k=v" and checks that the keys come in order
// (extensions after them are refused: none is defined).
func parseAttrs(msg string, keys ...string) (map[string]string, error) {
	parts := strings.Split(msg, ",")
	if len(parts) != len(keys) {
		return nil, fmt.Errorf("%w: %q should hold %s", ErrBadMessage, msg, strings.Join(keys, ","))
	}
	out := make(map[string]string, len(keys))
	for i, p := range parts {
		v, ok := strings.CutPrefix(p, keys[i]+"=")
		if !ok || v == "" {
			return nil, fmt.Errorf("%w: attribute %d of %q should be %s=", ErrBadMessage, i, msg, keys[i])
		}
		out[keys[i]] = v
	}
	return out, nil
}
