package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/security"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/wire"
)

// The native port of a node with auth = scram: the SDK authenticates
// with SCRAM-SHA-256; a wrong password, an unknown user and a client
// without a user are refused with AUTHENTICATION_FAILED; a user's denied
// produce, fetch and delete are AUTHORIZATION_FAILED; repeated failures
// from one address are limited and counted; and the node serves the
// administrator throughout.
func TestNativeAuthentication(t *testing.T) {
	n := runNode(t, t.TempDir(), func(c *config.Config) {
		scramNode(c)
		c.Security.LoginFailuresMax = 3
	})
	waitUser(t, n.svc, "root", true)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dial := func(user, pw string) (*client.Client, error) {
		return client.DialConfig(ctx, client.Config{Brokers: []string{n.ClientAddr()}, Username: user, Password: pw,
			RetryAttemptsMax: 1, DialTimeout: 5 * time.Second})
	}
	admin, err := dial("root", "rootpw")
	if err != nil {
		t.Fatalf("administrator: %v", err)
	}
	defer admin.Close()
	for _, name := range []string{"orders", "payments"} {
		if _, err := admin.CreateTopic(ctx, client.TopicSpec{Name: name, Partitions: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := changeUser(n.svc, &service.UserChange{Op: metadata.OpCreateUser, Name: "app", Password: "apppw", Rules: []security.Rule{
		{Allow: true, Op: security.OpWrite, Topic: "orders"}, {Allow: true, Op: security.OpDescribe, Topic: "payments"}}}); err != nil {
		t.Fatal(err)
	}

	app, err := dial("app", "apppw")
	if err != nil {
		t.Fatalf("app: %v", err)
	}
	defer app.Close()
	p, err := app.NewProducer(ctx, client.ProducerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(ctx)
	if _, err := p.Produce(ctx, client.Record{Topic: "orders", Value: []byte("ok")}); err != nil {
		t.Fatalf("allowed produce: %v", err)
	}
	if _, err := p.Produce(ctx, client.Record{Topic: "payments", Value: []byte("no")}); !errors.Is(err, wire.ErrAuthorizationFailed) {
		t.Fatalf("denied produce: %v", err)
	}
	if _, err := app.DeleteTopic(ctx, "orders"); !errors.Is(err, wire.ErrAuthorizationFailed) {
		t.Fatalf("denied delete: %v", err)
	}
	// Cluster operations need the cluster permission on every native call
	// (Reassign once went to the service without the user's guard).
	if _, err := app.Reassign(ctx, &wire.ReassignRequest{Action: wire.ReassignList}); !errors.Is(err, wire.ErrAuthorizationFailed) {
		t.Fatalf("reassign without the cluster permission: %v", err)
	}
	if _, err := app.Reassign(ctx, &wire.ReassignRequest{Action: wire.ReassignDrain, Node: 1, DryRun: true}); !errors.Is(err, wire.ErrAuthorizationFailed) {
		t.Fatalf("drain without the cluster permission: %v", err)
	}
	if _, err := app.ChangeRoster(ctx, &wire.ChangeRosterRequest{Action: wire.RosterList}); !errors.Is(err, wire.ErrAuthorizationFailed) {
		t.Fatalf("roster without the cluster permission: %v", err)
	}

	// No user: every request after the handshake is refused, with a reason.
	if _, err := client.DialConfig(ctx, client.Config{Brokers: []string{n.ClientAddr()}, RetryAttemptsMax: 1}); !errors.Is(err, wire.ErrAuthenticationFailed) {
		t.Fatalf("no user: %v", err)
	}
	if _, err := dial("app", "wrong"); !errors.Is(err, wire.ErrAuthenticationFailed) {
		t.Fatalf("wrong password: %v", err)
	}
	if _, err := dial("ghost", "apppw"); !errors.Is(err, wire.ErrAuthenticationFailed) {
		t.Fatalf("unknown user: %v", err)
	}
	// The third failure reached the limit: even the right password waits.
	if _, err := dial("app", "wrong"); !errors.Is(err, wire.ErrAuthenticationFailed) {
		t.Fatal(err)
	}
	_, err = dial("app", "apppw")
	var er *wire.ErrorResponse
	if !errors.As(err, &er) || er.Err != wire.ErrAuthenticationFailed || er.RetryAfterMs == 0 {
		t.Fatalf("after 3 failures: %v, want AUTHENTICATION_FAILED with retry_after_ms", err)
	}
	if f, r := n.logins.Failed.Load(), n.logins.Refused.Load(); f != 3 || r != 1 {
		t.Fatalf("counted %d failed, %d refused logins; want 3, 1", f, r)
	}
	// The node carries on for the connections already authenticated.
	if ts, err := admin.ListTopics(ctx); err != nil || len(ts) != 2 {
		t.Fatalf("administrator after the refusals: %v %v", ts, err)
	}
}
