package peerauth

import (
	"errors"
	"strings"
	"testing"
)

// handshake runs the whole exchange between two sides through the encoder,
// as the transport would, and returns each side's verdict.
func handshake(dSecret, lSecret string, d, l Params) (dialerErr, listenerErr error) {
	return handshakeSecrets(Secrets{Cluster: []byte(dSecret), HTTP: []byte("j")}, Secrets{Cluster: []byte(lSecret), HTTP: []byte("j")}, d, l)
}

func handshakeSecrets(ds, ls Secrets, d, l Params) (dialerErr, listenerErr error) {
	hello := Hello{Params: d, Nonce: NewNonce()}
	_, v, err := Decode(EncodeHello(hello))
	if err != nil {
		return err, err
	}
	h := v.(Hello)
	if err := Compatible(l, h.Params); err != nil {
		_, _, derr := Decode(EncodeRefusal(err.Error()))
		return derr, err
	}
	ch := NewChallenge(ls, h, l, NewNonce())
	_, v, err = Decode(EncodeChallenge(ch))
	if err != nil {
		return err, err
	}
	c := v.(Challenge)
	if err := VerifyChallenge(ds, hello, c); err != nil {
		_, _, lerr := Decode(EncodeRefusal(err.Error()))
		return err, lerr
	}
	_, v, err = Decode(EncodeProof(DialerProofs(ds, hello, c)))
	if err != nil {
		return err, err
	}
	if err := VerifyProof(ls, h, ch, v.(Proofs)); err != nil {
		_, _, derr := Decode(EncodeRefusal(err.Error()))
		return derr, err
	}
	kind, _, err := Decode(EncodeWelcome())
	if err != nil || kind != KindWelcome {
		return err, err
	}
	return nil, nil
}

func TestHandshake(t *testing.T) {
	d := Params{Version: "0.1.0", Node: 1, K: 2, ConnIndex: 1}
	l := Params{Version: "0.1.0", Node: 2, K: 2}
	if de, le := handshake("s3cret", "s3cret", d, l); de != nil || le != nil {
		t.Fatalf("same secret refused: %v / %v", de, le)
	}
	de, le := handshake("s3cret", "other", d, l)
	if !errors.Is(de, ErrAuth) || !errors.Is(le, ErrRefused) {
		t.Fatalf("other secret: dialer %v, listener %v", de, le)
	}
	if !strings.Contains(de.Error(), "cluster.secret differs") {
		t.Fatalf("the refusal does not say which secret: %v", de)
	}
	// Another http.jwt_secret (or none): refused, and both sides say so.
	for _, other := range []string{"other", ""} {
		de, le = handshakeSecrets(Secrets{Cluster: []byte("s"), HTTP: []byte("j")}, Secrets{Cluster: []byte("s"), HTTP: []byte(other)}, d, l)
		if !errors.Is(de, ErrAuth) || !errors.Is(le, ErrRefused) || !strings.Contains(de.Error(), "node 2's http.jwt_secret differs from node 1's") ||
			!strings.Contains(le.Error(), "http.jwt_secret differs") {
			t.Fatalf("jwt secret %q against \"j\": dialer %v, listener %v", other, de, le)
		}
	}
	if de, le := handshakeSecrets(Secrets{Cluster: []byte("s")}, Secrets{Cluster: []byte("s")}, d, l); de != nil || le != nil {
		t.Fatalf("no jwt secret on either side refused: %v / %v", de, le)
	}
	l2 := l
	l2.Version = "0.2.0"
	de, le = handshake("s", "s", d, l2)
	if !errors.Is(le, ErrIncompatible) || !errors.Is(de, ErrRefused) ||
		!strings.Contains(de.Error(), `"0.2.0" here, "0.1.0" on node 1`) {
		t.Fatalf("version mismatch: dialer %v, listener %v", de, le)
	}
	l3 := l
	l3.K = 4
	de, le = handshake("s", "s", d, l3)
	if !errors.Is(le, ErrIncompatible) || !strings.Contains(de.Error(), "replica_connections_per_peer is 4 here, 2 on node 1") {
		t.Fatalf("K mismatch: dialer %v, listener %v", de, le)
	}
	// Cluster ids: refused when both are known and differ, in either
	// direction, and the refusal names both; a node that knows none yet
	// (a new one) is let in.
	a, b := [16]byte{0xaa, 1}, [16]byte{0xbb, 2}
	da, lb := d, l
	da.Cluster, lb.Cluster = a, b
	de, le = handshake("s", "s", da, lb)
	if !errors.Is(le, ErrIncompatible) || !errors.Is(de, ErrRefused) ||
		!strings.Contains(le.Error(), "belongs to cluster bb020000-0000-0000-0000-000000000000, node 1's to cluster aa010000-0000-0000-0000-000000000000") {
		t.Fatalf("cluster mismatch: dialer %v, listener %v", de, le)
	}
	la := l
	la.Cluster = a
	if de, le := handshake("s", "s", da, la); de != nil || le != nil {
		t.Fatalf("the same cluster refused: %v / %v", de, le)
	}
	if de, le := handshake("s", "s", d, la); de != nil || le != nil {
		t.Fatalf("a new node (no cluster id yet) refused: %v / %v", de, le)
	}
}

func TestProofIsBoundToTheConnection(t *testing.T) {
	secret := Secrets{Cluster: []byte("k"), HTTP: []byte("j")}
	h := Hello{Params: Params{Version: "v", Node: 1, K: 1}, Nonce: NewNonce()}
	c := NewChallenge(secret, h, Params{Version: "v", Node: 2, K: 1}, NewNonce())
	// The listener's proofs replayed as the dialer's must fail.
	if err := VerifyProof(secret, h, c, Proofs{Cluster: c.Proof, HTTP: c.HTTPProof}); !errors.Is(err, ErrAuth) {
		t.Fatal("a listener proof passed as a dialer proof")
	}
	// The same proof on another connection index must fail.
	h2 := h
	h2.ConnIndex = 1
	if err := VerifyChallenge(secret, h2, c); !errors.Is(err, ErrAuth) {
		t.Fatal("proof accepted for another connection index")
	}
}

func TestDecodeRejectsGarbage(t *testing.T) {
	good := EncodeHello(Hello{Params: Params{Version: "v", Node: 1, K: 1}})
	cases := map[string][]byte{
		"empty":     nil,
		"http":      []byte("GET / HTTP/1.1\r\n\r\n"),
		"truncated": good[:len(good)-1],
		"trailing":  append(append([]byte{}, good...), 0),
		"kind":      append(append([]byte{}, Magic[:]...), 9, ProtocolVersion),
		"version":   append(append([]byte{}, Magic[:]...), KindWelcome, 9),
	}
	for name, b := range cases {
		if _, _, err := Decode(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte{})
	f.Add(EncodeHello(Hello{Params: Params{Version: "v1", Node: 3, K: 2}}))
	f.Add(EncodeChallenge(Challenge{Params: Params{Version: "v1"}}))
	f.Add(EncodeRefusal("no"))
	f.Fuzz(func(t *testing.T, b []byte) {
		kind, v, err := Decode(b)
		if err != nil {
			return
		}
		var again []byte
		switch kind {
		case KindHello:
			again = EncodeHello(v.(Hello))
		case KindChallenge:
			again = EncodeChallenge(v.(Challenge))
		case KindProof:
			again = EncodeProof(v.(Proofs))
		case KindWelcome:
			again = EncodeWelcome()
		}
		if string(again) != string(b) {
			t.Fatalf("decode/encode not identical for kind %d", kind)
		}
	})
}
