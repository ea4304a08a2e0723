package node

import (
	"errors"
	"testing"
	"time"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/security"
	"github.com/corestream/corestream/cluster/service"
)

func scramNode(c *config.Config) {
	c.Security.Auth = config.AuthSCRAM
	c.Security.AdminUser, c.Security.AdminPassword = "root", "rootpw"
}

// waitUser waits for user name to be in (or, with want false, out of)
// the node's published metadata.
func waitUser(t testing.TB, s service.Users, name string, want bool) *metadata.User {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		u, err := s.User(name)
		if err == nil && (u != nil) == want {
			return u
		}
		if time.Now().After(deadline) {
			t.Fatalf("user %s present %v after 10 s (err %v), want %v", name, u != nil, err, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func changeUser(s service.Users, req *service.UserChange) (*metadata.User, error) {
	return await(func(done func(*metadata.User, error)) { s.ChangeUser(nil, req, done) })
}

// A node with auth = scram creates its administrator at the first
// start, users come and go by committed commands, a restart keeps them
// (from the log and from a snapshot), and the guarded service refuses a
// user's denied call with AUTHORIZATION_FAILED while the node carries on.
func TestUsersLifecycleAndPermissions(t *testing.T) {
	defer func(old int64) { metaSnapshotEvery = old }(metaSnapshotEvery)
	metaSnapshotEvery = 3
	dir := t.TempDir()
	n := runNode(t, dir, scramNode)
	root := waitUser(t, n.svc, "root", true)
	if !root.Superuser || !root.Credential.Verify("rootpw") {
		t.Fatalf("bootstrap administrator %+v", root)
	}
	svcCreate(t, n.svc, "orders", 1)
	svcCreate(t, n.svc, "payments", 1)

	if _, err := changeUser(n.svc, &service.UserChange{Op: metadata.OpCreateUser, Name: "app", Password: "apppw",
		Rules: []security.Rule{{Allow: true, Op: security.OpWrite, Topic: "orders"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := changeUser(n.svc, &service.UserChange{Op: metadata.OpCreateUser, Name: "app", Password: "x"}); !errors.Is(err, service.ErrUserExists) {
		t.Fatalf("second create: %v", err)
	}
	if _, err := changeUser(n.svc, &service.UserChange{Op: metadata.OpGrant, Name: "nobody", Rules: []security.Rule{{Allow: true, Op: security.OpCluster}}}); !errors.Is(err, service.ErrUnknownUser) {
		t.Fatalf("grant to nobody: %v", err)
	}

	app := service.Guard(n.svc, n.svc, security.Principal{User: "app"})
	produce := func(s service.Service, topic string) error {
		_, err := await(func(done func(service.ProduceResult, error)) {
			s.Produce(nil, &service.ProduceRequest{PartitionRef: service.PartitionRef{Topic: topic, Generation: service.GenerationUnknown},
				Records: oneBatch(t, "x")}, done)
		})
		return err
	}
	if err := produce(app, "orders"); err != nil {
		t.Fatalf("allowed produce: %v", err)
	}
	if err := produce(app, "payments"); !errors.Is(err, service.ErrAuthorization) {
		t.Fatalf("denied produce: %v", err)
	}
	if _, err := await(func(done func(metadata.TopicID, error)) {
		app.DeleteTopic(nil, &service.DeleteTopicRequest{Name: "orders"}, done)
	}); !errors.Is(err, service.ErrAuthorization) {
		t.Fatalf("denied delete: %v", err)
	}
	if _, err := n.svc.DescribeTopic("orders"); err != nil {
		t.Fatalf("the node after refusals: %v", err)
	}
	// A deleted user's open connection loses its rights at once.
	if _, err := changeUser(n.svc, &service.UserChange{Op: metadata.OpDeleteUser, Name: "app"}); err != nil {
		t.Fatal(err)
	}
	if err := produce(app, "orders"); !errors.Is(err, service.ErrAuthorization) {
		t.Fatalf("produce as a deleted user: %v", err)
	}
	if _, err := changeUser(n.svc, &service.UserChange{Op: metadata.OpCreateUser, Name: "ops", Password: "opspw"}); err != nil {
		t.Fatal(err)
	}
	if _, err := changeUser(n.svc, &service.UserChange{Op: metadata.OpSetPassword, Name: "ops", Password: "new"}); err != nil {
		t.Fatal(err)
	}

	n.stop(t)
	n = runNode(t, dir, func(c *config.Config) {
		scramNode(c)
		c.Security.AdminPassword = "ignored at a later start"
	})
	if u := waitUser(t, n.svc, "ops", true); !u.Credential.Verify("new") {
		t.Fatal("ops's new password did not survive the restart")
	}
	waitUser(t, n.svc, "app", false)
	if u := waitUser(t, n.svc, "root", true); !u.Credential.Verify("rootpw") {
		t.Fatal("a later start replaced the administrator's password")
	}

	// Every user deleted: a restart does not bring the configured
	// administrator back (its password may be known to someone removed).
	for _, name := range []string{"ops", "root"} {
		if _, err := changeUser(n.svc, &service.UserChange{Op: metadata.OpDeleteUser, Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	n.stop(t)
	n = runNode(t, dir, scramNode)
	svcCreate(t, n.svc, "after", 1) // a commit: the bootstrap rule runs at each
	if u, err := n.svc.User("root"); err != nil || u != nil {
		t.Fatalf("the configured administrator came back (err %v)", err)
	}
}
