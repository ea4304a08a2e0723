package service

import (
	"time"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/security"
	"github.com/corestream/corestream/shard"
)

// Users are the calls that read and change the cluster's users and their
// permissions (docs/security.md). They are a separate interface from
// Service so a front end that manages no users needs none of them; a
// front end that authenticates reads User.
type Users interface {
	// User is the committed user named name (nil: none) from this node's
	// published metadata; any goroutine. ErrMetadataNotReady until the
	// metadata is loaded.
	User(name string) (*metadata.User, error)
	// ListUsers lists every user sorted by name (credentials included:
	// a front end shows none of them).
	ListUsers() ([]*metadata.User, error)
	// ChangeUser creates, deletes or changes a user on the metadata
	// primary (an admin call: see Admin for where it runs and what it
	// answers) and answers the user as committed.
	ChangeUser(from *shard.Shard, req *UserChange, done func(*metadata.User, error))
}

// UserChange is one change of a user.
type UserChange struct {
	// Op is metadata.OpCreateUser, OpDeleteUser, OpSetPassword, OpGrant,
	// OpRevoke, OpGrantACL (a grant that creates a user without a
	// credential when absent: Kafka's CreateAcls) or OpAlterScram (Kafka's
	// AlterUserScramCredentials: Scram says what; a credential it deletes
	// that the user lacks is ErrUnknownUser).
	Op   metadata.Op
	Name string
	// Password (create, set password) is derived into a SCRAM credential
	// before the command leaves the node that received it; it is never
	// stored, logged or replicated.
	Password string
	// Superuser (create) makes the user an administrator.
	Superuser bool
	// Rules (create, grant, revoke) are the permissions to add or remove.
	Rules []security.Rule
	// Scram (OpAlterScram) is the credential change, its Name Name.
	Scram   *metadata.ScramChange
	Timeout time.Duration
}
