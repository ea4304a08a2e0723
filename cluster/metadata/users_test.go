package metadata

import (
	"bytes"
	"crypto/rand"
	"errors"
	"reflect"
	"testing"

	"github.com/corestream/corestream/cluster/security"
	"github.com/corestream/corestream/netio/wire/scram"
)

func cred(t *testing.T, pw string) scram.Credential {
	t.Helper()
	c, err := scram.NewCredential(pw, scram.IterationsDefault, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestUserCommands(t *testing.T) {
	s := New()
	readOrders := security.Rule{Allow: true, Op: security.OpRead, Topic: "orders"}
	steps := []struct {
		cmd  Command
		want error
	}{
		{Command{Version: 1, Op: OpCreateUser, User: &User{Name: "alice", Credential: cred(t, "a")}}, nil},
		{Command{Version: 1, Op: OpCreateUser, User: &User{Name: "alice", Credential: cred(t, "b")}}, ErrUserExists},
		{Command{Version: 1, Op: OpCreateUser, User: &User{Name: "bad,name", Credential: cred(t, "b")}}, ErrInvalidCommand},
		{Command{Version: 1, Op: OpCreateUser, User: &User{Name: "nocred"}}, ErrInvalidCommand},
		{Command{Version: 1, Op: OpSetPassword, User: &User{Name: "bob", Credential: cred(t, "b")}}, ErrUnknownUser},
		{Command{Version: 1, Op: OpGrant, User: &User{Name: "alice", Rules: []security.Rule{readOrders, readOrders}}}, nil},
		{Command{Version: 1, Op: OpGrant, User: &User{Name: "alice", Rules: []security.Rule{{Op: "alter"}}}}, ErrInvalidCommand},
		{Command{Version: 1, Op: OpDeleteUser, User: &User{Name: "bob"}}, ErrUnknownUser},
	}
	for i, st := range steps {
		if _, err := apply(t, s, st.cmd); !errors.Is(err, st.want) {
			t.Fatalf("step %d (%s): %v, want %v", i, st.cmd.Op, err, st.want)
		}
	}
	a := s.User("alice")
	if a == nil || a.Generation != 1 || !reflect.DeepEqual(a.Rules, []security.Rule{readOrders}) {
		t.Fatalf("alice %+v: want generation 1 and one rule (a granted rule is held once)", a)
	}
	if !a.Credential.Verify("a") {
		t.Fatal("alice's credential does not verify her password")
	}
	old := a
	if _, err := apply(t, s, Command{Version: 1, Op: OpSetPassword, User: &User{Name: "alice", Credential: cred(t, "new")}}); err != nil {
		t.Fatal(err)
	}
	if a = s.User("alice"); a.Generation != 2 || !a.Credential.Verify("new") || a.Credential.Verify("a") || old.Generation != 1 {
		t.Fatalf("after passwd: %+v (the old copy must stay unchanged: %d)", a, old.Generation)
	}
	if _, err := apply(t, s, Command{Version: 1, Op: OpRevoke, User: &User{Name: "alice", Rules: []security.Rule{readOrders}}}); err != nil || len(s.User("alice").Rules) != 0 {
		t.Fatalf("revoke: %v, rules %v", err, s.User("alice").Rules)
	}
	// A deleted user recreated starts at a generation above any token
	// issued to the one deleted.
	if _, err := apply(t, s, Command{Version: 1, Op: OpDeleteUser, User: &User{Name: "alice"}}); err != nil || s.User("alice") != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := apply(t, s, Command{Version: 1, Op: OpCreateUser, User: &User{Name: "alice", Credential: cred(t, "c")}}); err != nil {
		t.Fatal(err)
	}
	if g := s.User("alice").Generation; g != 3 {
		t.Fatalf("recreated alice has generation %d, want 3", g)
	}
}

func TestSnapshotKeepsUsers(t *testing.T) {
	s := New()
	for _, c := range []Command{
		{Version: 1, Op: OpCreateUser, User: &User{Name: "admin", Credential: cred(t, "x"), Superuser: true}},
		{Version: 1, Op: OpCreateUser, User: &User{Name: "app", Credential: cred(t, "y"), Rules: []security.Rule{{Allow: true, Op: security.OpWrite, Topic: "o.", Prefix: true}}}},
		{Version: 1, Op: OpSetPassword, User: &User{Name: "app", Credential: cred(t, "z")}},
		{Version: 1, Op: OpCreateUser, User: &User{Name: "gone", Credential: cred(t, "g")}},
		{Version: 1, Op: OpDeleteUser, User: &User{Name: "gone"}},
	} {
		if _, err := apply(t, s, c); err != nil {
			t.Fatal(err)
		}
	}
	snap := s.Snapshot()
	if bytes.Contains(snap, []byte(`"z"`)) {
		t.Fatal("the snapshot holds a password")
	}
	r, err := Restore(snap)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.Users(), s.Users()) || r.userGen != s.userGen || r.userGen != 4 {
		t.Fatalf("restored users %+v gen %d, want %+v gen %d", r.Users(), r.userGen, s.Users(), s.userGen)
	}
	if !bytes.Equal(r.Snapshot(), snap) {
		t.Fatal("a restored state snapshots differently")
	}
}
