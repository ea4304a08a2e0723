package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/security"
	"github.com/corestream/corestream/cluster/service"
)

// The Kafka port of a node with auth = scram, driven by franz-go's SASL
// options: PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 log in; a wrong
// password and an unknown user are SASL_AUTHENTICATION_FAILED; a client
// without SASL gets nothing; a user's denied produce, fetch and delete
// are TOPIC_AUTHORIZATION_FAILED; and the node serves throughout.
func TestKafkaSASL(t *testing.T) {
	n := runNode(t, t.TempDir(), func(c *config.Config) {
		scramNode(c)
		withKafka(c)
	})
	waitUser(t, n.svc, "root", true)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	addr := n.KafkaAddr()
	as := func(m sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
		return kafkaClient(t, []string{addr}, append([]kgo.Opt{kgo.SASL(m), kgo.RetryTimeout(2 * time.Second)}, opts...)...)
	}
	scram256 := func(u, p string) sasl.Mechanism { return scram.Auth{User: u, Pass: p}.AsSha256Mechanism() }
	scram512 := func(u, p string) sasl.Mechanism { return scram.Auth{User: u, Pass: p}.AsSha512Mechanism() }
	plainAuth := func(u, p string) sasl.Mechanism { return plain.Auth{User: u, Pass: p}.AsMechanism() }

	root := kadm.NewClient(as(scram512("root", "rootpw")))
	kafkaCreate(t, ctx, root, "orders", 1, -1)
	kafkaCreate(t, ctx, root, "payments", 1, -1)
	if _, err := changeUser(n.svc, &service.UserChange{Op: metadata.OpCreateUser, Name: "app", Password: "apppw", Rules: []security.Rule{
		{Allow: true, Op: security.OpWrite, Topic: "orders"}, {Allow: true, Op: security.OpRead, Topic: "orders"}}}); err != nil {
		t.Fatal(err)
	}

	for name, m := range map[string]sasl.Mechanism{"PLAIN": plainAuth("app", "apppw"), "SCRAM-SHA-256": scram256("app", "apppw"), "SCRAM-SHA-512": scram512("app", "apppw")} {
		cl := as(m, kgo.DefaultProduceTopic("orders"))
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(name)}).FirstErr(); err != nil {
			t.Fatalf("%s: allowed produce: %v", name, err)
		}
	}
	app := as(scram256("app", "apppw"))
	err := app.ProduceSync(ctx, &kgo.Record{Topic: "payments", Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("denied produce: %v", err)
	}
	res, err := kadm.NewClient(app).DeleteTopics(ctx, "orders")
	if err == nil {
		err = res["orders"].Err
	}
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("denied delete: %v", err)
	}
	reader := as(scram256("app", "apppw"), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"payments": {0: kgo.NewOffset().AtStart()}}))
	pctx, pcancel := context.WithTimeout(ctx, 3*time.Second)
	fs := reader.PollFetches(pctx)
	pcancel()
	var fetchErr error
	fs.EachError(func(_ string, _ int32, e error) { fetchErr = e })
	if len(fs.Records()) != 0 || (fetchErr != nil && !errors.Is(fetchErr, kerr.TopicAuthorizationFailed) && !errors.Is(fetchErr, context.DeadlineExceeded)) {
		t.Fatalf("denied read: %d records, %v", len(fs.Records()), fetchErr)
	}

	for name, m := range map[string]sasl.Mechanism{"wrong password": scram512("app", "nope"), "unknown user": scram256("ghost", "apppw"), "PLAIN wrong password": plainAuth("app", "nope")} {
		err := as(m).Ping(ctx)
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("%s: %v, want SASL_AUTHENTICATION_FAILED", name, err)
		}
	}
	if n.logins.Failed.Load() != 3 {
		t.Fatalf("counted %d failed logins, want 3", n.logins.Failed.Load())
	}
	// No SASL: the metadata request is refused with a reason.
	noAuth := kafkaClient(t, []string{addr}, kgo.RetryTimeout(time.Second))
	if _, err := kadm.NewClient(noAuth).ListTopics(ctx); err == nil {
		t.Fatal("a client without SASL listed topics")
	}
	if topics, err := root.ListTopics(ctx); err != nil || !topics.Has("orders") {
		t.Fatalf("administrator after the refusals: %v", err)
	}
}
