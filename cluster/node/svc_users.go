package node

import (
	"crypto/rand"
	"errors"
	"time"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/wire/scram"
	"github.com/corestream/corestream/shard"
)

// The service's user calls (service.Users) and the bootstrap of the
// first administrator (docs/security.md).

var _ service.Users = (*nodeService)(nil)

// User implements service.Users.
func (s *nodeService) User(name string) (*metadata.User, error) {
	if err := s.ready(); err != nil {
		return nil, s.svcErr(err)
	}
	return s.view().Users[name], nil
}

// ListUsers implements service.Users.
func (s *nodeService) ListUsers() ([]*metadata.User, error) {
	if err := s.ready(); err != nil {
		return nil, s.svcErr(err)
	}
	return s.view().UsersSorted(), nil
}

// ChangeUser implements service.Users. A password is derived into its
// credential here, on the caller's goroutine (PBKDF2 costs milliseconds
// by design), before the call reaches the controller's shard.
func (s *nodeService) ChangeUser(from *shard.Shard, req *service.UserChange, done func(*metadata.User, error)) {
	cmd, err := userCommand(req)
	if err != nil {
		done(nil, err)
		return
	}
	timeout := timeoutOf(req.Timeout)
	adminCall(s, from, true, func(c metadataAdmin, reply func(*metadata.User, error)) { c.changeUser(cmd, timeout, reply) }, done)
}

// userCommand is the metadata command of req.
func userCommand(req *service.UserChange) (metadata.Command, error) {
	if err := scram.ValidateUsername(req.Name); err != nil {
		return metadata.Command{}, service.Errorf(service.ErrInvalidRequest, "%v", err)
	}
	u := &metadata.User{Name: req.Name, Superuser: req.Superuser, Rules: req.Rules}
	switch req.Op {
	case metadata.OpCreateUser, metadata.OpSetPassword:
		cred, cred512, err := credentials(req.Password)
		if err != nil {
			return metadata.Command{}, service.Errorf(service.ErrInvalidRequest, "%v", err)
		}
		u.Credential, u.CredentialSHA512 = cred, cred512
	case metadata.OpDeleteUser, metadata.OpGrant, metadata.OpRevoke:
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

// changeUser proposes cmd and answers the user as committed.
func (c *controller) changeUser(cmd metadata.Command, timeout time.Duration, done func(*metadata.User, error)) {
	c.propose(cmd, timeout, func(res metadata.Result, err error) {
		switch {
		case errors.Is(err, metadata.ErrUserExists):
			done(nil, service.Errorf(service.ErrUserExists, "%v", err))
		case errors.Is(err, metadata.ErrUnknownUser):
			done(nil, service.Errorf(service.ErrUnknownUser, "%v", err))
		case err != nil:
			done(nil, metaKindErr(err))
		default:
			done(res.User, nil)
		}
	})
}

// bootstrapUser is the administrator cfg asks for at the first start
// (nil when auth is none).
func bootstrapUser(cfg config.Security) (*metadata.User, error) {
	if cfg.Auth != config.AuthSCRAM {
		return nil, nil
	}
	cred, cred512, err := credentials(cfg.AdminPassword)
	if err != nil {
		return nil, err
	}
	return &metadata.User{Name: cfg.AdminUser, Credential: cred, CredentialSHA512: cred512, Superuser: true}, nil
}

// credentials are the SCRAM-SHA-256 and SCRAM-SHA-512 credentials of
// password, each with its own salt.
func credentials(password string) (scram.Credential, *scram.Credential, error) {
	cred, err := scram.SHA256.NewCredential(password, scram.IterationsDefault, rand.Reader)
	if err != nil {
		return cred, nil, err
	}
	cred512, err := scram.SHA512.NewCredential(password, scram.IterationsDefault, rand.Reader)
	return cred, &cred512, err
}

// maybeBootstrap creates the configured administrator when this node
// leads a metadata group that never had a user: the cluster's first
// start. A cluster whose users were all deleted later does not get the
// configured one back (its password may be known to people it should
// no longer admit). A failed proposal is tried again at the next
// commit; two nodes that both try (a primary change meanwhile) are
// harmless, the second is refused as USER_ALREADY_EXISTS.
func (c *controller) maybeBootstrap() {
	if c.bootstrap == nil || c.bootstrapping || c.state.UserGeneration() > 0 || c.r == nil || !c.r.IsPrimary() || c.d.ready() != nil {
		return
	}
	c.bootstrapping = true
	cmd := metadata.Command{Version: metadata.CommandVersion, Op: metadata.OpCreateUser, User: c.bootstrap}
	c.propose(cmd, adminTimeoutDefault, func(_ metadata.Result, err error) {
		c.bootstrapping = false
		if err != nil && !errors.Is(err, metadata.ErrUserExists) {
			c.d.log.Warn("security: creating the administrator of security.admin_user failed; retrying at the next metadata commit", "user", c.bootstrap.Name, "err", err)
			return
		}
		c.d.log.Info("security: created the administrator of security.admin_user (the cluster had no user)", "user", c.bootstrap.Name)
		c.bootstrap = nil
	})
}
