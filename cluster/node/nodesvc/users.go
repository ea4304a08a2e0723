package nodesvc

import (
	"crypto/rand"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/wire/scram"
	"github.com/corestream/corestream/shard"
)

// The service's user calls (service.Users; docs/security.md).

var _ service.Users = (*Service)(nil)

// User implements service.Users.
func (s *Service) User(name string) (*metadata.User, error) {
	if err := s.d.Ready(); err != nil {
		return nil, s.svcErr(err)
	}
	return s.d.View().Users[name], nil
}

// ListUsers implements service.Users.
func (s *Service) ListUsers() ([]*metadata.User, error) {
	if err := s.d.Ready(); err != nil {
		return nil, s.svcErr(err)
	}
	return s.d.View().UsersSorted(), nil
}

// ChangeUser implements service.Users. A password is derived into its
// credential here, on the caller's goroutine (PBKDF2 costs milliseconds
// by design), before the call reaches the controller's shard.
func (s *Service) ChangeUser(from *shard.Shard, req *service.UserChange, done func(*metadata.User, error)) {
	cmd, err := userCommand(req)
	if err != nil {
		done(nil, err)
		return
	}
	timeout := req.Timeout
	adminCall(s, from, true, func(c Admin, reply func(*metadata.User, error)) { c.ChangeUser(cmd, timeout, reply) }, done)
}

// userCommand is the metadata command of req.
func userCommand(req *service.UserChange) (metadata.Command, error) {
	if err := scram.ValidateUsername(req.Name); err != nil {
		return metadata.Command{}, service.Errorf(service.ErrInvalidRequest, "%v", err)
	}
	u := &metadata.User{Name: req.Name, Superuser: req.Superuser, Rules: req.Rules}
	switch req.Op {
	case metadata.OpCreateUser, metadata.OpSetPassword:
		cred, cred512, err := Credentials(req.Password)
		if err != nil {
			return metadata.Command{}, service.Errorf(service.ErrInvalidRequest, "%v", err)
		}
		u.Credential, u.CredentialSHA512 = cred, cred512
	case metadata.OpDeleteUser, metadata.OpGrant, metadata.OpRevoke, metadata.OpGrantACL:
	case metadata.OpAlterScram:
		if req.Scram == nil || req.Scram.Name != req.Name {
			return metadata.Command{}, service.Errorf(service.ErrInvalidRequest, "a SCRAM credential change for %s names no change, or another user", req.Name)
		}
		return metadata.Command{Version: metadata.CommandVersion, Op: req.Op, Scram: req.Scram}, nil
	default:
		return metadata.Command{}, service.Errorf(service.ErrInvalidRequest, "unknown user operation %q", req.Op)
	}
	for _, r := range req.Rules {
		if err := r.Validate(); err != nil {
			return metadata.Command{}, service.Errorf(service.ErrInvalidRequest, "%v", err)
		}
	}
	return metadata.Command{Version: metadata.CommandVersion, Op: req.Op, User: u}, nil
}

// Credentials are the SCRAM-SHA-256 and SCRAM-SHA-512 credentials of
// password, each with its own salt: what a user change stores, and what
// the node's bootstrap of the first administrator stores.
func Credentials(password string) (scram.Credential, *scram.Credential, error) {
	cred, err := scram.SHA256.NewCredential(password, scram.IterationsDefault, rand.Reader)
	if err != nil {
		return cred, nil, err
	}
	cred512, err := scram.SHA512.NewCredential(password, scram.IterationsDefault, rand.Reader)
	return cred, &cred512, err
}
