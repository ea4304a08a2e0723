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

func cred512(t *testing.T, pw string) *scram.Credential {
	t.Helper()
	c, err := scram.SHA512.NewCredential(pw, scram.IterationsDefault, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &c
}

// TestScramCommands walks Kafka's credential model over the users: an
// upsert creates a user with that mechanism only, each mechanism is set
// and deleted on its own, a deletion of a credential the user lacks is
// ErrNoCredential and changes nothing, a user left with none keeps its
// rules and verifies no password, and a snapshot keeps every shape.
func TestScramCommands(t *testing.T) {
	s := New()
	c256 := cred(t, "two-five-six")
	readOrders := security.Rule{Allow: true, Op: security.OpRead, Topic: "orders"}
	steps := []struct {
		ch   ScramChange
		want error
	}{
		{ScramChange{Name: "kafka", SHA512: cred512(t, "five-one-two")}, nil},
		{ScramChange{Name: "kafka", DeleteSHA256: true}, ErrNoCredential},
		{ScramChange{Name: "nobody", DeleteSHA512: true}, ErrNoCredential},
		{ScramChange{Name: "kafka", SHA512: cred512(t, "x"), DeleteSHA512: true}, ErrInvalidCommand},
		{ScramChange{Name: "kafka"}, ErrInvalidCommand},
		{ScramChange{Name: "kafka", SHA256: &scram.Credential{Iterations: 4096}}, ErrInvalidCommand},
		{ScramChange{Name: "kafka", SHA256: cred512(t, "wrong size")}, ErrInvalidCommand},
		{ScramChange{Name: "bad,name", SHA256: &c256}, ErrInvalidCommand},
	}
	for i, st := range steps {
		ch := st.ch
		if _, err := apply(t, s, Command{Version: 1, Op: OpAlterScram, Scram: &ch}); !errors.Is(err, st.want) {
			t.Fatalf("step %d: %v, want %v", i, err, st.want)
		}
	}
	k := s.User("kafka")
	if k == nil || k.HasSHA256() || k.CredentialSHA512 == nil || !k.VerifyPassword("five-one-two") || k.VerifyPassword("x") || k.Generation != 1 || len(s.Users()) != 1 {
		t.Fatalf("kafka %+v (of %d users): want a SHA-512 credential only, generation 1", k, len(s.Users()))
	}
	if _, err := apply(t, s, Command{Version: 1, Op: OpGrant, User: &User{Name: "kafka", Rules: []security.Rule{readOrders}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := apply(t, s, Command{Version: 1, Op: OpAlterScram, Scram: &ScramChange{Name: "kafka", SHA256: &c256, DeleteSHA512: true}}); err != nil {
		t.Fatal(err)
	}
	if k = s.User("kafka"); !k.HasSHA256() || k.CredentialSHA512 != nil || !k.VerifyPassword("two-five-six") || k.Generation != 2 || len(k.Rules) != 1 {
		t.Fatalf("kafka %+v: want a SHA-256 credential only, generation 2, its rule kept", k)
	}
	if _, err := apply(t, s, Command{Version: 1, Op: OpAlterScram, Scram: &ScramChange{Name: "kafka", DeleteSHA256: true}}); err != nil {
		t.Fatal(err)
	}
	if k = s.User("kafka"); k.HasSHA256() || k.CredentialSHA512 != nil || k.VerifyPassword("two-five-six") || k.VerifyPassword("") || len(k.Rules) != 1 {
		t.Fatalf("kafka %+v: want no credential and its rule", k)
	}
	// CreateAcls's grant makes a user that has no credential yet; a
	// plain grant to an unknown user stays refused.
	if _, err := apply(t, s, Command{Version: 1, Op: OpGrant, User: &User{Name: "later", Rules: []security.Rule{readOrders}}}); !errors.Is(err, ErrUnknownUser) {
		t.Fatalf("grant to an unknown user: %v", err)
	}
	if _, err := apply(t, s, Command{Version: 1, Op: OpGrantACL, User: &User{Name: "later", Rules: []security.Rule{{Op: "alter"}}}}); !errors.Is(err, ErrInvalidCommand) || s.User("later") != nil {
		t.Fatalf("an invalid ACL grant: %v, user %+v (want refused, no user)", err, s.User("later"))
	}
	if _, err := apply(t, s, Command{Version: 1, Op: OpGrantACL, User: &User{Name: "later", Rules: []security.Rule{readOrders}}}); err != nil {
		t.Fatal(err)
	}
	if l := s.User("later"); l == nil || l.HasSHA256() || l.CredentialSHA512 != nil || !reflect.DeepEqual(l.Rules, []security.Rule{readOrders}) {
		t.Fatalf("later %+v: want no credential and the rule", l)
	}
	if _, err := apply(t, s, Command{Version: 1, Op: OpCreateUser, User: &User{Name: "both", Credential: cred(t, "p"), CredentialSHA512: cred512(t, "p")}}); err != nil {
		t.Fatal(err)
	}
	snap := s.Snapshot()
	r, err := Restore(snap)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.Users(), s.Users()) || r.userGen != s.userGen || !bytes.Equal(r.Snapshot(), snap) {
		t.Fatalf("restored users %+v gen %d, want %+v gen %d", r.Users(), r.userGen, s.Users(), s.userGen)
	}
}
