package metadata

import (
	"errors"
	"fmt"

	"github.com/corestream/corestream/netio/wire/scram"
)

// Kafka's SCRAM credential APIs (DescribeUserScramCredentials,
// AlterUserScramCredentials) see a user's credentials one mechanism at a
// time: a user has a SCRAM-SHA-256 credential, a SCRAM-SHA-512 one, both
// or none, each set or deleted on its own. A user created by `user
// create` has both (one password); one that AlterUserScramCredentials
// created may have either; one whose credentials were all deleted, or
// that CreateAcls named first (OpGrantACL), has none, keeps its rules,
// and cannot log in until it gets one.

// ErrNoCredential: a deletion names a credential the user does not have
// (or a user that does not exist): Kafka's RESOURCE_NOT_FOUND.
var ErrNoCredential = errors.New("metadata: no such SCRAM credential")

// ScramChange is one user's credential change: what to upsert, what to
// delete. A user absent is created (no rules, not a superuser) when
// something is upserted.
//
// Invariant (checked at apply): a mechanism is upserted or deleted, not
// both, and at least one thing changes.
type ScramChange struct {
	Name         string            `json:"name"`
	SHA256       *scram.Credential `json:"sha256,omitempty"`
	SHA512       *scram.Credential `json:"sha512,omitempty"`
	DeleteSHA256 bool              `json:"delete_sha256,omitempty"`
	DeleteSHA512 bool              `json:"delete_sha512,omitempty"`
}

// HasSHA256 reports whether u has a SCRAM-SHA-256 credential.
func (u *User) HasSHA256() bool { return len(u.Credential.StoredKey) > 0 }

// CredentialOf is u's credential of m; ok is false when u has none.
func (u *User) CredentialOf(m *scram.Mechanism) (c scram.Credential, ok bool) {
	switch {
	case m == scram.SHA256 && u.HasSHA256():
		return u.Credential, true
	case m == scram.SHA512 && u.CredentialSHA512 != nil:
		return *u.CredentialSHA512, true
	}
	return scram.Credential{}, false
}

// VerifyPassword checks password against u's credentials (a PLAIN or
// HTTP login): the SHA-256 one, or the SHA-512 one when u has only that.
// A user with no credential verifies no password.
func (u *User) VerifyPassword(password string) bool {
	if c, ok := u.CredentialOf(scram.SHA256); ok {
		return scram.SHA256.Verify(c, password)
	}
	if c, ok := u.CredentialOf(scram.SHA512); ok {
		return scram.SHA512.Verify(c, password)
	}
	return false
}

// applyScram applies OpAlterScram. A credential change ends the user's
// login tokens, as a new password does (a new generation).
func (s *State) applyScram(c Command) (Result, error) {
	ch := c.Scram
	if ch == nil {
		return Result{}, fmt.Errorf("%w: %s without a change", ErrInvalidCommand, c.Op)
	}
	if err := scram.ValidateUsername(ch.Name); err != nil {
		return Result{}, fmt.Errorf("%w: %v", ErrInvalidCommand, err)
	}
	if (ch.SHA256 != nil && ch.DeleteSHA256) || (ch.SHA512 != nil && ch.DeleteSHA512) ||
		(ch.SHA256 == nil && ch.SHA512 == nil && !ch.DeleteSHA256 && !ch.DeleteSHA512) {
		return Result{}, fmt.Errorf("%w: a SCRAM change upserts or deletes each mechanism at most once, and something", ErrInvalidCommand)
	}
	if ch.SHA256 != nil {
		if err := scram.SHA256.Valid(*ch.SHA256); err != nil {
			return Result{}, fmt.Errorf("%w: %v", ErrInvalidCommand, err)
		}
	}
	if ch.SHA512 != nil {
		if err := scram.SHA512.Valid(*ch.SHA512); err != nil {
			return Result{}, fmt.Errorf("%w: %v", ErrInvalidCommand, err)
		}
	}
	old := s.users[ch.Name]
	u := User{Name: ch.Name}
	if old != nil {
		u = *old
	}
	if ch.DeleteSHA256 && (old == nil || !old.HasSHA256()) {
		return Result{}, fmt.Errorf("%w: user %s has no %s credential", ErrNoCredential, ch.Name, scram.SHA256.Name)
	}
	if ch.DeleteSHA512 && (old == nil || old.CredentialSHA512 == nil) {
		return Result{}, fmt.Errorf("%w: user %s has no %s credential", ErrNoCredential, ch.Name, scram.SHA512.Name)
	}
	if old == nil && len(s.users) >= UsersMax {
		return Result{}, fmt.Errorf("%w: the cluster already has %d users", ErrInvalidCommand, UsersMax)
	}
	switch {
	case ch.SHA256 != nil:
		u.Credential = cloneCredential(*ch.SHA256)
	case ch.DeleteSHA256:
		u.Credential = scram.Credential{}
	}
	switch {
	case ch.SHA512 != nil:
		c512 := cloneCredential(*ch.SHA512)
		u.CredentialSHA512 = &c512
	case ch.DeleteSHA512:
		u.CredentialSHA512 = nil
	}
	u.Generation = s.userGen + 1
	s.userGen = u.Generation
	s.users[u.Name] = &u
	return Result{User: &u}, nil
}

func cloneCredential(c scram.Credential) scram.Credential {
	c.Salt = append([]byte(nil), c.Salt...)
	c.StoredKey = append([]byte(nil), c.StoredKey...)
	c.ServerKey = append([]byte(nil), c.ServerKey...)
	return c
}
