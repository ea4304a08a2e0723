package security

import (
	"errors"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func TestTokens(t *testing.T) {
	secret := []byte("s3cret")
	t0 := time.Unix(1_700_000_000, 0)
	tok, err := IssueToken(secret, "alice", 7, t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if u, g, err := VerifyToken(secret, tok, t0.Add(59*time.Minute)); err != nil || u != "alice" || g != 7 {
		t.Fatalf("valid token: %q %d %v", u, g, err)
	}
	if _, _, err := VerifyToken(secret, tok, t0.Add(61*time.Minute)); !errors.Is(err, ErrTokenExpired) {
		t.Fatalf("expired: %v", err)
	}
	if _, _, err := VerifyToken([]byte("other"), tok, t0); !errors.Is(err, ErrTokenInvalid) {
		t.Fatalf("another secret (forged): %v", err)
	}
	if _, _, err := VerifyToken(secret, tok[:len(tok)-2]+"xx", t0); !errors.Is(err, ErrTokenInvalid) {
		t.Fatalf("tampered: %v", err)
	}
	// A token of another kind (a forwarding proof's audience is a node id).
	proof, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.RegisteredClaims{Subject: "alice", Audience: jwt.ClaimStrings{"2"},
		ExpiresAt: jwt.NewNumericDate(t0.Add(time.Minute))}).SignedString(secret)
	if _, _, err := VerifyToken(secret, proof, t0); !errors.Is(err, ErrTokenInvalid) {
		t.Fatalf("a forwarding proof as a login token: %v", err)
	}
	none, _ := jwt.NewWithClaims(jwt.SigningMethodNone, tokenClaims{RegisteredClaims: jwt.RegisteredClaims{Subject: "alice",
		Audience: jwt.ClaimStrings{TokenAudience}, ExpiresAt: jwt.NewNumericDate(t0.Add(time.Minute))}}).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if _, _, err := VerifyToken(secret, none, t0); !errors.Is(err, ErrTokenInvalid) {
		t.Fatalf("alg none: %v", err)
	}
}
