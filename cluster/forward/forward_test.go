package forward

import (
	"errors"
	"testing"
	"time"
)

func TestSignVerify(t *testing.T) {
	secret := []byte("jwt-secret")
	now := time.Unix(1_800_000_000, 0)
	r := Request{Method: "POST", PathQuery: "/v1/topics/orders/partitions/3/messages?acks=quorum", Body: []byte("hello"), From: 2, To: 1}
	proof, err := Sign(secret, r, now)
	if err != nil {
		t.Fatal(err)
	}
	if from, err := Verify(secret, proof, r, now.Add(9*time.Second)); err != nil || from != 2 {
		t.Fatalf("valid proof refused: from=%d err=%v", from, err)
	}
	if _, err := Verify(secret, proof, r, now.Add(11*time.Second)); !errors.Is(err, ErrExpired) {
		t.Fatalf("proof accepted after 11 s: %v", err)
	}
	bad := []struct {
		name   string
		secret []byte
		req    Request
		proof  string
	}{
		{"other secret", []byte("other"), r, proof},
		{"other body", secret, Request{Method: r.Method, PathQuery: r.PathQuery, Body: []byte("HELLO"), To: 1}, proof},
		{"other path", secret, Request{Method: r.Method, PathQuery: "/v1/topics/x", Body: r.Body, To: 1}, proof},
		{"other target", secret, Request{Method: r.Method, PathQuery: r.PathQuery, Body: r.Body, To: 3}, proof},
		{"garbage", secret, r, "not.a.jwt"},
		{"alg none", secret, r, "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJtIjoiUE9TVCJ9."},
	}
	for _, b := range bad {
		if _, err := Verify(b.secret, b.proof, b.req, now); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v", b.name, err)
		}
	}
	if _, err := Sign(nil, r, now); err == nil {
		t.Fatal("signed without a secret")
	}
}
