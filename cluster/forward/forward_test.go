package forward

import (
	"errors"
	"strconv"
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

// A proof is accepted once: the same proof again within its 10 s is
// refused as replayed, while a new proof of the same request passes.
func TestReplayRefused(t *testing.T) {
	secret := []byte("jwt-secret")
	now := time.Unix(1_800_000_000, 0)
	r := Request{Method: "DELETE", PathQuery: "/v1/topics/orders", From: 2, To: 1}
	var rp Replays
	proof, err := Sign(secret, r, now)
	if err != nil {
		t.Fatal(err)
	}
	if from, err := rp.Verify(secret, proof, r, now.Add(time.Second)); err != nil || from != 2 {
		t.Fatalf("first use: %d %v", from, err)
	}
	if _, err := rp.Verify(secret, proof, r, now.Add(2*time.Second)); !errors.Is(err, ErrReplayed) {
		t.Fatalf("replay: %v", err)
	}
	again, _ := Sign(secret, r, now.Add(3*time.Second))
	if _, err := rp.Verify(secret, again, r, now.Add(3*time.Second)); err != nil {
		t.Fatalf("a new proof of the same request: %v", err)
	}
	// After the window, an old proof is expired, not a replay.
	if _, err := rp.Verify(secret, proof, r, now.Add(11*time.Second)); !errors.Is(err, ErrExpired) {
		t.Fatalf("after the window: %v", err)
	}
}

// The ids remembered are bounded; expired ones make room.
func TestReplaysBounded(t *testing.T) {
	secret := []byte("s")
	now := time.Unix(1_800_000_000, 0)
	r := Request{Method: "GET", PathQuery: "/", To: 1}
	var rp Replays
	for i := 0; i < ReplayIDsMax; i++ {
		rp.seen = rp.seenOrNew()
		rp.seen[strconv.Itoa(i)] = now.Add(time.Second)
	}
	p, _ := Sign(secret, r, now)
	if _, err := rp.Verify(secret, p, r, now); !errors.Is(err, ErrReplayed) {
		t.Fatalf("a full table accepted a proof: %v", err)
	}
	p2, _ := Sign(secret, r, now.Add(2*time.Second))
	if _, err := rp.Verify(secret, p2, r, now.Add(2*time.Second)); err != nil || len(rp.seen) != 1 {
		t.Fatalf("expired ids did not make room: %v, %d remembered", err, len(rp.seen))
	}
}
