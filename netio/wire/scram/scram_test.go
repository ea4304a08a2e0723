package scram

import (
	"bytes"
	"crypto/pbkdf2"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

func lookupOf(users map[string]Credential) Lookup {
	return func(u string) (Credential, bool) { c, ok := users[u]; return c, ok }
}

func exchange(t *testing.T, users map[string]Credential, user, pw string) (string, error) {
	t.Helper()
	cl, err := NewClientConversation(user, pw, rand.Reader)
	if err != nil {
		return "", err
	}
	srv := NewServerConversation(lookupOf(users), rand.Reader)
	sf, err := srv.First(cl.First())
	if err != nil {
		return "", err
	}
	cf, err := cl.Final(sf)
	if err != nil {
		return "", err
	}
	fin, who, err := srv.Final(cf)
	if err != nil {
		return "", err
	}
	if err := cl.Verify(fin); err != nil {
		t.Fatalf("client refused the server's signature: %v", err)
	}
	if strings.Contains(cf, pw) || strings.Contains(cl.First(), pw) {
		t.Fatalf("the password travels in clear")
	}
	return who, nil
}

func TestSCRAMExchange(t *testing.T) {
	alice, err := NewCredential("s3cret", IterationsDefault, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	users := map[string]Credential{"alice": alice}
	if who, err := exchange(t, users, "alice", "s3cret"); err != nil || who != "alice" {
		t.Fatalf("right password: %q, %v", who, err)
	}
	if _, err := exchange(t, users, "alice", "wrong"); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("wrong password: %v, want ErrAuthFailed", err)
	}
	if _, err := exchange(t, users, "bob", "s3cret"); !errors.Is(err, ErrAuthFailed) {
		t.Fatalf("unknown user: %v, want ErrAuthFailed", err)
	}
}

// TestSCRAMVector is RFC 7677's example exchange.
func TestSCRAMVector(t *testing.T) {
	cred, err := DeriveCredential("pencil", mustB64(t, "W22ZaJ0SNY7soEsUEjb6gQ=="), 4096)
	if err != nil {
		t.Fatal(err)
	}
	cl := &ClientConversation{m: SHA256, user: "user", password: "pencil", nonce: "rOprNGfwEbeRWgbNEkqO"}
	cl.bare = "n=user,r=" + cl.nonce
	sf := "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
	cf, err := cl.Final(sf)
	if err != nil {
		t.Fatal(err)
	}
	if want := "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="; cf != want {
		t.Fatalf("client-final\n got %s\nwant %s", cf, want)
	}
	if err := cl.Verify("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="); err != nil {
		t.Fatal(err)
	}
	srv := &ServerConversation{m: SHA256, step: 1, user: "user", cred: cred, known: true, nonce: "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0", clientBare: cl.bare, serverFirst: sf}
	fin, _, err := srv.Final(cf)
	if err != nil || fin != "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=" {
		t.Fatalf("server-final %q, %v", fin, err)
	}
}

func TestSCRAMBadMessages(t *testing.T) {
	cred, _ := NewCredential("pw", IterationsDefault, rand.Reader)
	lookup := lookupOf(map[string]Credential{"u": cred})
	for _, first := range []string{"", "y,,n=u,r=x", "n,,n=u", "n,,r=x,n=u", "n,,n=u,r=x,e=1", strings.Repeat("n", 5000)} {
		if _, err := NewServerConversation(lookup, rand.Reader).First(first); err == nil {
			t.Errorf("First(%.20q) accepted", first)
		}
	}
	srv := NewServerConversation(lookup, rand.Reader)
	if _, err := srv.First("n,,n=u,r=abc"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := srv.Final("c=biws,r=abc,p=AAAA"); !errors.Is(err, ErrBadMessage) {
		t.Errorf("a nonce the server did not extend: %v", err)
	}
	if _, _, err := srv.Final("c=biws,r=abc,p=AAAA"); !errors.Is(err, ErrBadMessage) {
		t.Errorf("a second final: %v", err)
	}
	// A downgrade: a server asking for 1 iteration is refused.
	cl, _ := NewClientConversation("u", "pw", rand.Reader)
	if _, err := cl.Final("r=" + cl.nonce + "xyz,s=AAAA,i=1"); !errors.Is(err, ErrBadMessage) {
		t.Errorf("1 iteration: %v", err)
	}
}

func TestCredentialVerify(t *testing.T) {
	c, err := NewCredential("hunter2", IterationsDefault, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Verify("hunter2") || c.Verify("hunter3") {
		t.Fatal("Verify does not tell the password apart")
	}
	if bytes.Contains(c.StoredKey, []byte("hunter2")) || c.Valid() != nil {
		t.Fatal("credential invalid or holds the password")
	}
	if _, err := NewCredential("", IterationsDefault, rand.Reader); !errors.Is(err, ErrInvalidPassword) {
		t.Fatalf("empty password: %v", err)
	}
	if _, err := DeriveCredential("x", []byte("salt"), 10); !errors.Is(err, ErrInvalidPassword) {
		t.Fatalf("10 iterations: %v", err)
	}
}

// TestCredentialFromSalted: a credential built from the client's salted
// password (Kafka's AlterUserScramCredentials) is the one the password
// derives, for both hashes, and verifies the password; a salted password
// of the other hash's size, no salt or too few iterations are refused.
func TestCredentialFromSalted(t *testing.T) {
	for _, m := range []*Mechanism{SHA256, SHA512} {
		salt := []byte("0123456789abcdef")
		want, err := m.DeriveCredential("hunter2", salt, IterationsDefault)
		if err != nil {
			t.Fatal(err)
		}
		salted, err := pbkdf2.Key(m.hash, "hunter2", salt, IterationsDefault, m.size)
		if err != nil {
			t.Fatal(err)
		}
		got, err := m.CredentialFromSalted(salted, salt, IterationsDefault)
		if err != nil || !bytes.Equal(got.StoredKey, want.StoredKey) || !bytes.Equal(got.ServerKey, want.ServerKey) || m.Valid(got) != nil {
			t.Fatalf("%s: %+v, %v; want %+v", m.Name, got, err, want)
		}
		if !m.Verify(got, "hunter2") || m.Verify(got, "hunter3") {
			t.Fatalf("%s: Verify does not tell the password apart", m.Name)
		}
		for _, bad := range []struct {
			salted, salt []byte
			iterations   int
		}{{salted[:len(salted)-1], salt, IterationsDefault}, {salted, nil, IterationsDefault}, {salted, salt, IterationsMin - 1}} {
			if _, err := m.CredentialFromSalted(bad.salted, bad.salt, bad.iterations); !errors.Is(err, ErrInvalidPassword) {
				t.Fatalf("%s: %d-byte salted, %d-byte salt, %d iterations: %v", m.Name, len(bad.salted), len(bad.salt), bad.iterations, err)
			}
		}
	}
}

func TestValidateUsername(t *testing.T) {
	for name, ok := range map[string]bool{"alice": true, "a.b-c_d@e": true, "": false, "a,b": false, "a=b": false, strings.Repeat("a", 129): false} {
		if err := ValidateUsername(name); (err == nil) != ok {
			t.Errorf("%q: %v", name, err)
		}
	}
}

func mustB64(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// SCRAM-SHA-512, as Kafka clients run it, with its own credentials.
func TestSCRAMSHA512(t *testing.T) {
	cred, err := SHA512.NewCredential("pw", IterationsDefault, rand.Reader)
	if err != nil || SHA512.Valid(cred) != nil || SHA256.Valid(cred) == nil {
		t.Fatalf("credential: %v", err)
	}
	lookup := lookupOf(map[string]Credential{"u": cred})
	for _, tc := range []struct {
		pw string
		ok bool
	}{{"pw", true}, {"nope", false}} {
		cl, _ := SHA512.NewClientConversation("u", tc.pw, rand.Reader)
		srv := SHA512.NewServerConversation(lookup, rand.Reader)
		sf, err := srv.First(cl.First())
		if err != nil {
			t.Fatal(err)
		}
		cf, err := cl.Final(sf)
		if err != nil {
			t.Fatal(err)
		}
		fin, _, err := srv.Final(cf)
		if (err == nil) != tc.ok {
			t.Fatalf("password %q: %v", tc.pw, err)
		}
		if tc.ok && cl.Verify(fin) != nil {
			t.Fatal("the client refused the server's signature")
		}
	}
}

// librdkafka 2.0's client-final names its own nonce followed by the
// server's whole nonce; Kafka accepts a nonce that ends with the server's,
// and so do we. One that lacks the server's is refused.
func TestSCRAMClientNoncePrefixed(t *testing.T) {
	cred, err := NewCredential("pw", IterationsDefault, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	users := map[string]Credential{"u": cred}
	for _, tc := range []struct {
		name  string
		nonce func(client, server string) string
		ok    bool
	}{
		{"exact", func(_, s string) string { return s }, true},
		{"librdkafka 2.0", func(c, s string) string { return c + s }, true},
		{"server's nonce cut", func(c, s string) string { return s[:len(s)-1] }, false},
		{"client's only", func(c, _ string) string { return c }, false},
	} {
		cl, err := NewClientConversation("u", "pw", rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		srv := NewServerConversation(lookupOf(users), rand.Reader)
		sf, err := srv.First(cl.First())
		if err != nil {
			t.Fatal(err)
		}
		attrs, err := parseAttrs(sf, "r", "s", "i")
		if err != nil {
			t.Fatal(err)
		}
		cf, err := cl.final(sf, attrs, tc.nonce(cl.nonce, attrs["r"]))
		if err != nil {
			t.Fatal(err)
		}
		fin, who, err := srv.Final(cf)
		if got := err == nil; got != tc.ok {
			t.Fatalf("%s: Final: %v, want ok=%v", tc.name, err, tc.ok)
		}
		if tc.ok {
			if who != "u" {
				t.Fatalf("%s: authenticated %q", tc.name, who)
			}
			if err := cl.Verify(fin); err != nil {
				t.Fatalf("%s: server signature: %v", tc.name, err)
			}
		}
	}
}
