// Package forward signs and verifies the proof that travels with an HTTP
// request forwarded from the node that received it to the partition's
// primary. The proof is a JWT (HS256, the cluster's shared http.jwt_secret)
// that expires ProofTTL after signing and is bound to one request: its
// method, path with query, body digest and the target node. A request that
// carries a proof was forwarded once already and is never forwarded again.
//
// Clocks come in as arguments so the expiry is testable; nodes must keep
// their clocks synchronised to well within ProofTTL.
package forward

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
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
		}}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(secret)
}

// Verify checks that proof was signed with secret for exactly r (r.From
// is ignored and read from the proof) and has not expired at now. It
// returns the forwarding node.
func Verify(secret []byte, proof string, r Request, now time.Time) (from int32, err error) {
	var c claims
	_, err = jwt.ParseWithClaims(proof, &c, func(t *jwt.Token) (any, error) { return secret, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithTimeFunc(func() time.Time { return now }),
		jwt.WithAudience(strconv.Itoa(int(r.To))),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt())
	if err != nil {
		if errors.Is(err, jwt.ErrTokenExpired) {
			return 0, fmt.Errorf("%w: %v (clocks more than %v apart?)", ErrExpired, err, ProofTTL)
		}
		return 0, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if c.Method != r.Method || c.Path != r.PathQuery || c.Body != digest(r.Body) {
		return 0, fmt.Errorf("%w: proof is for %s %s, request is %s %s (or another body)", ErrInvalid, c.Method, c.Path, r.Method, r.PathQuery)
	}
	n, err := strconv.Atoi(c.Issuer)
	if err != nil {
		return 0, fmt.Errorf("%w: issuer %q", ErrInvalid, c.Issuer)
	}
	return int32(n), nil
}
