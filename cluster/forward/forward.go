// Package forward signs and verifies the proof that travels with an HTTP
// request forwarded from the node that received it to the partition's
// primary. The proof is a JWT (HS256, the cluster's shared http.jwt_secret)
// that expires ProofTTL after signing and is bound to one request: its
// method, path with query, body digest and the target node. A request that
// carries a proof was forwarded once already and is never forwarded again.
//
// Each proof carries a random id (the JWT's jti). A Replays remembers the
// ids it has accepted until their proofs expire and refuses a proof seen
// before, so a proof captured on the wire cannot be sent again within
// its 10 s.
//
// Clocks come in as arguments so the expiry is testable; nodes must keep
// their clocks synchronised to well within ProofTTL.
package forward

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// ProofTTL is how long a forwarding proof is valid.
const ProofTTL = 10 * time.Second

// Header is the HTTP header that carries the proof.
const Header = "X-Corestream-Forwarded"

// Errors returned by Verify; the wrapped detail says what failed.
var (
	ErrInvalid = errors.New("forward: invalid forwarding proof")
	ErrExpired = errors.New("forward: forwarding proof expired")
	// ErrReplayed: the proof was accepted once already.
	ErrReplayed = errors.New("forward: forwarding proof replayed")
)

// Request is what a proof is bound to.
type Request struct {
	Method string
	// PathQuery is the request path with its raw query, as received.
	PathQuery string
	Body      []byte
	// From and To are the forwarding and the target node ids.
	From, To int32
}

type claims struct {
	Method string `json:"m"`
	Path   string `json:"p"`
	Body   string `json:"b"`
	jwt.RegisteredClaims
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Sign returns the proof for r, valid for ProofTTL after now.
func Sign(secret []byte, r Request, now time.Time) (string, error) {
	if len(secret) == 0 {
		return "", fmt.Errorf("%w: http.jwt_secret is not set", ErrInvalid)
	}
	c := claims{Method: r.Method, Path: r.PathQuery, Body: digest(r.Body),
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    strconv.Itoa(int(r.From)),
			Audience:  jwt.ClaimStrings{strconv.Itoa(int(r.To))},
			IssuedAt:  jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(now.Add(ProofTTL)),
			ID:        rand.Text(),
		}}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(secret)
}

// Verify checks that proof was signed with secret for exactly r (r.From
// is ignored and read from the proof) and has not expired at now. It
// returns the forwarding node. It does not check replays: see
// Replays.Verify.
func Verify(secret []byte, proof string, r Request, now time.Time) (from int32, err error) {
	from, _, err = verify(secret, proof, r, now)
	return from, err
}

func verify(secret []byte, proof string, r Request, now time.Time) (from int32, c claims, err error) {
	_, err = jwt.ParseWithClaims(proof, &c, func(t *jwt.Token) (any, error) { return secret, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithTimeFunc(func() time.Time { return now }),
		jwt.WithAudience(strconv.Itoa(int(r.To))),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt())
	if err != nil {
		if errors.Is(err, jwt.ErrTokenExpired) {
			return 0, c, fmt.Errorf("%w: %v (clocks more than %v apart?)", ErrExpired, err, ProofTTL)
		}
		return 0, c, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if c.Method != r.Method || c.Path != r.PathQuery || c.Body != digest(r.Body) {
		return 0, c, fmt.Errorf("%w: proof is for %s %s, request is %s %s (or another body)", ErrInvalid, c.Method, c.Path, r.Method, r.PathQuery)
	}
	n, err := strconv.Atoi(c.Issuer)
	if err != nil {
		return 0, c, fmt.Errorf("%w: issuer %q", ErrInvalid, c.Issuer)
	}
	return int32(n), c, nil
}

// ReplayIDsMax bounds the proof ids a Replays remembers: at most this many
// forwarded requests are accepted per ProofTTL (about 6,500 a second);
// past it a proof is refused as if replayed, with a message that says so.
const ReplayIDsMax = 65536

// Replays verifies proofs and refuses one seen before within its
// validity. Safe for concurrent use.
//
// mu guards seen.
type Replays struct {
	mu   sync.Mutex
	seen map[string]time.Time // proof id → its expiry
}

// Verify is Verify and the replay check: a proof whose id was accepted
// before is refused with ErrReplayed.
func (rp *Replays) Verify(secret []byte, proof string, r Request, now time.Time) (from int32, err error) {
	from, c, err := verify(secret, proof, r, now)
	if err != nil {
		return 0, err
	}
	if c.ID == "" {
		return 0, fmt.Errorf("%w: the proof has no id", ErrInvalid)
	}
	rp.mu.Lock()
	defer rp.mu.Unlock()
	rp.seen = rp.seenOrNew()
	if _, dup := rp.seen[c.ID]; dup {
		return 0, fmt.Errorf("%w: proof %s from node %d was accepted before", ErrReplayed, c.ID, from)
	}
	if len(rp.seen) >= ReplayIDsMax {
		for id, exp := range rp.seen {
			if !now.Before(exp) {
				delete(rp.seen, id)
			}
		}
		if len(rp.seen) >= ReplayIDsMax {
			return 0, fmt.Errorf("%w: %d forwarded requests within %v; retry shortly", ErrReplayed, ReplayIDsMax, ProofTTL)
		}
	}
	rp.seen[c.ID] = c.ExpiresAt.Time
	return from, nil
}

// seenOrNew is seen, made when nil. REQUIRES: mu held (or no sharing).
func (rp *Replays) seenOrNew() map[string]time.Time {
	if rp.seen == nil {
		return map[string]time.Time{}
	}
	return rp.seen
}
