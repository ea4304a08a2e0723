package metadata

import (
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/corestream/corestream/cluster/security"
	"github.com/corestream/corestream/netio/wire/scram"
)

// Users and their permissions are metadata like topics: changed only by
// commands in the metadata log, so every node authenticates and
// authorizes against the same committed set. A password never enters a
// command: the proposer derives its SCRAM credential (scram.Credential,
// salted and iterated) and the command carries that.

// UsersMax bounds the number of users in the cluster.
const UsersMax = 10000

// Errors of the user commands.
var (
	ErrUserExists  = errors.New("metadata: user already exists")
	ErrUnknownUser = errors.New("metadata: unknown user")
)

// User is one user.
type User struct {
	Name string `json:"name"`
	// Credential is the SCRAM-SHA-256 credential; empty (no stored key)
	// for a user made by Kafka's APIs with a SHA-512 credential only, or
	// none (HasSHA256).
	Credential scram.Credential `json:"credential"`
	// CredentialSHA512 is the SCRAM-SHA-512 credential of the same
	// password, for Kafka clients that use that mechanism (nil for a
	// user whose password was set without one).
	CredentialSHA512 *scram.Credential `json:"credential_sha512,omitempty"`
	// Superuser may do everything, whatever Rules say.
	Superuser bool `json:"superuser,omitempty"`
	// Rules are the user's permissions (security.Allowed).
	Rules []security.Rule `json:"rules,omitempty"`
	// Generation counts the user's password changes since creation (and
	// a recreated user starts above the deleted one's): a login token
	// names the generation it was issued for, so a new password, or a
	// delete, ends the tokens issued before.
	Generation int64 `json:"generation"`
}

// UserGeneration is the last generation handed to a user: 0 until the
// first user is created, and never 0 again (users deleted or not).
func (s *State) UserGeneration() int64 { return s.userGen }

// User returns the user named name, or nil. The caller must not modify it.
func (s *State) User(name string) *User { return s.users[name] }

// Users returns every user sorted by name.
func (s *State) Users() []*User {
	out := make([]*User, 0, len(s.users))
	for _, u := range s.users {
		out = append(out, u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// applyUser applies the user commands. Users are copied on write, as
// topics are: readers may hold the old *User.
func (s *State) applyUser(c Command) (Result, error) {
	if c.User == nil {
		return Result{}, fmt.Errorf("%w: %s without a user", ErrInvalidCommand, c.Op)
	}
	if err := scram.ValidateUsername(c.User.Name); err != nil {
		return Result{}, fmt.Errorf("%w: %v", ErrInvalidCommand, err)
	}
	old := s.users[c.User.Name]
	if c.Op == OpGrantACL && old == nil {
		// A principal Kafka's CreateAcls names before it has a
		// credential: a user that cannot log in until it gets one
		// (AlterUserScramCredentials, `user passwd`).
		if err := checkRules(c.User.Rules); err != nil {
			return Result{}, err
		}
		if len(s.users) >= UsersMax {
			return Result{}, fmt.Errorf("%w: the cluster already has %d users", ErrInvalidCommand, UsersMax)
		}
		old = &User{Name: c.User.Name, Generation: s.userGen + 1}
		s.userGen = old.Generation
		s.users[old.Name] = old
	}
	if c.Op != OpCreateUser && old == nil {
		return Result{}, fmt.Errorf("%w: %s", ErrUnknownUser, c.User.Name)
	}
	switch c.Op {
	case OpCreateUser:
		if old != nil {
			return Result{}, fmt.Errorf("%w: %s", ErrUserExists, c.User.Name)
		}
		if len(s.users) >= UsersMax {
			return Result{}, fmt.Errorf("%w: the cluster already has %d users", ErrInvalidCommand, UsersMax)
		}
		if err := validCredentials(c.User); err != nil {
			return Result{}, err
		}
		u := &User{Name: c.User.Name, Credential: c.User.Credential, CredentialSHA512: c.User.CredentialSHA512,
			Superuser: c.User.Superuser, Generation: s.userGen + 1}
		if err := checkRules(c.User.Rules); err != nil {
			return Result{}, err
		}
		u.Rules = slices.Clone(c.User.Rules)
		s.userGen = u.Generation
		s.users[u.Name] = u
		return Result{User: u}, nil
	case OpDeleteUser:
		delete(s.users, old.Name)
		return Result{User: old}, nil
	case OpSetPassword:
		if err := validCredentials(c.User); err != nil {
			return Result{}, err
		}
		u := *old
		u.Credential, u.CredentialSHA512 = c.User.Credential, c.User.CredentialSHA512
		u.Generation = s.userGen + 1
		s.userGen = u.Generation
		s.users[u.Name] = &u
		return Result{User: &u}, nil
	case OpGrant, OpRevoke, OpGrantACL:
		if err := checkRules(c.User.Rules); err != nil {
			return Result{}, err
		}
		u := *old
		u.Rules = slices.Clone(old.Rules)
		for _, r := range c.User.Rules {
			u.Rules = slices.DeleteFunc(u.Rules, func(have security.Rule) bool { return have == r })
			if c.Op != OpRevoke {
				u.Rules = append(u.Rules, r)
			}
		}
		if len(u.Rules) > security.RulesPerUserMax {
			return Result{}, fmt.Errorf("%w: %s would have %d rules, at most %d", ErrInvalidCommand, u.Name, len(u.Rules), security.RulesPerUserMax)
		}
		s.users[u.Name] = &u
		return Result{User: &u}, nil
	}
	return Result{}, fmt.Errorf("%w: unknown op %q", ErrInvalidCommand, c.Op)
}

func checkRules(rules []security.Rule) error {
	if len(rules) > security.RulesPerUserMax {
		return fmt.Errorf("%w: %d rules, at most %d", ErrInvalidCommand, len(rules), security.RulesPerUserMax)
	}
	for _, r := range rules {
		if err := r.Validate(); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidCommand, err)
		}
	}
	return nil
}

func validCredentials(u *User) error {
	err := scram.SHA256.Valid(u.Credential)
	if err == nil && u.CredentialSHA512 != nil {
		err = scram.SHA512.Valid(*u.CredentialSHA512)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidCommand, err)
	}
	return nil
}

// restoreUser adds a user of a snapshot: as OpCreateUser, except that
// its credentials may be any of SHA-256, SHA-512, both or none (scram.go).
func (s *State) restoreUser(u *User) error {
	if err := scram.ValidateUsername(u.Name); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidCommand, err)
	}
	if s.users[u.Name] != nil {
		return fmt.Errorf("%w: %s", ErrUserExists, u.Name)
	}
	if u.HasSHA256() || len(u.Credential.Salt) > 0 {
		if err := scram.SHA256.Valid(u.Credential); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidCommand, err)
		}
	}
	if u.CredentialSHA512 != nil {
		if err := scram.SHA512.Valid(*u.CredentialSHA512); err != nil {
			return fmt.Errorf("%w: %v", ErrInvalidCommand, err)
		}
	}
	if err := checkRules(u.Rules); err != nil {
		return err
	}
	cp := *u
	cp.Rules = slices.Clone(u.Rules)
	s.users[cp.Name] = &cp
	return nil
}
