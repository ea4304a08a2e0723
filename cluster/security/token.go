package security

import (
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Login tokens of the HTTP API: a JWT (HS256, signed with the cluster's
// http.jwt_secret, so any node verifies a token another issued) naming
// the user and the user's generation (metadata.User.Generation), with an
// expiry. A token whose generation is not the user's current one (the
// password changed, or the user was deleted and perhaps recreated) is
// refused by the caller, who holds the users.

// TokenAudience tells a login token from a forwarding proof (whose
// audience is a node id): neither verifies as the other.
const TokenAudience = "corestream-login"

// Errors of tokens.
var (
	ErrTokenInvalid = errors.New("security: invalid token")
	ErrTokenExpired = errors.New("security: token expired")
)

type tokenClaims struct {
	Generation int64 `json:"gen"`
	jwt.RegisteredClaims
}

// IssueToken signs a token for user at generation gen, valid for ttl
// after now.
func IssueToken(secret []byte, user string, gen int64, now time.Time, ttl time.Duration) (string, error) {
	if len(secret) == 0 {
		return "", fmt.Errorf("%w: http.jwt_secret is not set", ErrTokenInvalid)
	}
	c := tokenClaims{Generation: gen, RegisteredClaims: jwt.RegisteredClaims{
		Subject: user, Audience: jwt.ClaimStrings{TokenAudience},
		IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(secret)
}

// VerifyToken checks token's signature, audience and expiry at now and
// returns its user and generation.
func VerifyToken(secret []byte, token string, now time.Time) (user string, gen int64, err error) {
	if len(secret) == 0 {
		return "", 0, fmt.Errorf("%w: http.jwt_secret is not set", ErrTokenInvalid)
	}
	var c tokenClaims
	_, err = jwt.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return secret, nil },
		jwt.WithValidMethods([]string{jwt.SigningMethodHS256.Alg()}),
		jwt.WithTimeFunc(func() time.Time { return now }),
		jwt.WithAudience(TokenAudience),
		jwt.WithExpirationRequired())
	if err != nil {
		if errors.Is(err, jwt.ErrTokenExpired) {
			return "", 0, fmt.Errorf("%w: log in again", ErrTokenExpired)
		}
		return "", 0, fmt.Errorf("%w: %v", ErrTokenInvalid, err)
	}
	if c.Subject == "" {
		return "", 0, fmt.Errorf("%w: no user", ErrTokenInvalid)
	}
	return c.Subject, c.Generation, nil
}
