package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/security"
	"github.com/corestream/corestream/cluster/service"
)

// scramClients makes Kafka clients of n that log in with SASL.
type scramClients struct {
	t    *testing.T
	addr string
}

func (s scramClients) as(m sasl.Mechanism) *kgo.Client {
	return kafkaClient(s.t, []string{s.addr}, kgo.SASL(m), kgo.RetryTimeout(2*time.Second))
}

func (s scramClients) sha512(u, p string) *kgo.Client {
	return s.as(scram.Auth{User: u, Pass: p}.AsSha512Mechanism())
}

func (s scramClients) sha256(u, p string) *kgo.Client {
	return s.as(scram.Auth{User: u, Pass: p}.AsSha256Mechanism())
}

// TestKafkaScramCredentials drives DescribeUserScramCredentials and
// AlterUserScramCredentials with kadm as an administrator would: a user
// created by an upsertion logs in with that mechanism (and PLAIN) and
// not the other, its credentials are described without keys, a second
// mechanism and a deletion change what logs in, and each refusal is
// Kafka's code with nothing changed; a user without the cluster
// permission gets CLUSTER_AUTHORIZATION_FAILED.
func TestKafkaScramCredentials(t *testing.T) {
	n := runNode(t, t.TempDir(), func(c *config.Config) {
		scramNode(c)
		withKafka(c)
	})
	waitUser(t, n.svc, "root", true)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cls := scramClients{t: t, addr: n.KafkaAddr()}
	rootCl := cls.sha512("root", "rootpw")
	root := kadm.NewClient(rootCl)

	all, err := root.DescribeUserSCRAMs(ctx)
	if err != nil || len(all) != 1 || len(all["root"].CredInfos) != 2 || all["root"].CredInfos[0] != (kadm.CredInfo{Mechanism: kadm.ScramSha256, Iterations: 4096}) {
		t.Fatalf("every user: %+v, %v; want root with both mechanisms", all, err)
	}

	// An upsertion creates kafka-app with a SHA-512 credential only.
	altered, err := root.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "kafka-app", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "s3cret"}})
	if err != nil || altered.Error() != nil {
		t.Fatalf("upsert: %+v, %v", altered, err)
	}
	waitFor(t, 10*time.Second, "kafka-app's SHA-512 credential", func() bool {
		u, err := n.svc.User("kafka-app")
		return err == nil && u != nil && u.CredentialSHA512 != nil
	})
	if err := cls.sha512("kafka-app", "s3cret").Ping(ctx); err != nil {
		t.Fatalf("SCRAM-SHA-512 login with the upserted credential: %v", err)
	}
	if err := cls.as(plain.Auth{User: "kafka-app", Pass: "s3cret"}.AsMechanism()).Ping(ctx); err != nil {
		t.Fatalf("PLAIN login of a SHA-512-only user: %v", err)
	}
	if err := cls.sha256("kafka-app", "s3cret").Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("SCRAM-SHA-256 login of a user without that credential: %v", err)
	}
	d, err := root.DescribeUserSCRAMs(ctx, "kafka-app")
	if err != nil || d["kafka-app"].Err != nil || len(d["kafka-app"].CredInfos) != 1 || d["kafka-app"].CredInfos[0] != (kadm.CredInfo{Mechanism: kadm.ScramSha512, Iterations: 8192}) {
		t.Fatalf("describe kafka-app: %+v, %v", d, err)
	}
	// A new user has no permission: it may not describe credentials.
	if _, err := kadm.NewClient(cls.sha512("kafka-app", "s3cret")).DescribeUserSCRAMs(ctx); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("describe without the cluster permission: %v", err)
	}
	res, err := kadm.NewClient(cls.sha512("kafka-app", "s3cret")).AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "root", Mechanism: kadm.ScramSha256}}, nil)
	if !errors.Is(err, kerr.ClusterAuthorizationFailed) && !errors.Is(res["root"].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alter without the cluster permission: %+v, %v", res, err)
	}

	// The refusals, each per user with nothing changed.
	raw := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	upsert := func(name string, mech int8, iterations int32, salted int) {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = name, mech, iterations, []byte("salt"), make([]byte, salted)
		raw.Upsertions = append(raw.Upsertions, u)
	}
	del := func(name string, mech int8) {
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name, d.Mechanism = name, mech
		raw.Deletions = append(raw.Deletions, d)
	}
	del("kafka-app", 1) // it has no SHA-256 credential
	del("twice", 2)     // and an upsertion below
	upsert("twice", 1, 4096, 32)
	upsert("few", 1, 4095, 32)
	upsert("many", 2, 16385, 64)
	upsert("mech", 3, 4096, 32)
	upsert("", 1, 4096, 32)
	upsert("bad,name", 1, 4096, 32)
	upsert("short", 2, 4096, 32) // a SHA-256-sized salted password
	want := map[string]int16{
		"kafka-app": kerr.ResourceNotFound.Code, "twice": kerr.DuplicateResource.Code, "few": kerr.UnacceptableCredential.Code,
		"many": kerr.UnacceptableCredential.Code, "mech": kerr.UnsupportedSaslMechanism.Code, "": kerr.UnacceptableCredential.Code,
		"bad,name": kerr.UnacceptableCredential.Code, "short": kerr.UnacceptableCredential.Code,
	}
	resp, err := raw.RequestWith(ctx, rootCl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Results) != len(want) {
		t.Fatalf("%d results, want one per user (%d): %+v", len(resp.Results), len(want), resp.Results)
	}
	for _, r := range resp.Results {
		if code, ok := want[r.User]; !ok || r.ErrorCode != code || r.ErrorMessage == nil {
			t.Fatalf("user %q: code %d (%v), want %d with a message", r.User, r.ErrorCode, r.ErrorMessage, code)
		}
	}
	if users, _ := n.svc.ListUsers(); len(users) != 2 {
		t.Fatalf("%d users after the refusals, want root and kafka-app", len(users))
	}
	desc := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, name := range []string{"ghost", "root", "root"} {
		u := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		u.Name = name
		desc.Users = append(desc.Users, u)
	}
	dresp, err := desc.RequestWith(ctx, rootCl)
	if err != nil || len(dresp.Results) != 2 || dresp.Results[0].ErrorCode != kerr.ResourceNotFound.Code || dresp.Results[1].ErrorCode != kerr.DuplicateResource.Code {
		t.Fatalf("describe ghost, root twice: %+v, %v", dresp, err)
	}

	// A SHA-256 credential with another password, then the SHA-512 one
	// deleted: only the new one logs in.
	if altered, err := root.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "kafka-app", Mechanism: kadm.ScramSha256, Password: "other"}}); err != nil || altered.Error() != nil {
		t.Fatalf("second mechanism: %+v, %v", altered, err)
	}
	if altered, err := root.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "kafka-app", Mechanism: kadm.ScramSha512}}, nil); err != nil || altered.Error() != nil {
		t.Fatalf("delete SHA-512: %+v, %v", altered, err)
	}
	waitFor(t, 10*time.Second, "kafka-app's SHA-512 credential deleted", func() bool {
		u, err := n.svc.User("kafka-app")
		return err == nil && u != nil && u.CredentialSHA512 == nil && u.HasSHA256()
	})
	if err := cls.sha256("kafka-app", "other").Ping(ctx); err != nil {
		t.Fatalf("SCRAM-SHA-256 login with the new credential: %v", err)
	}
	if err := cls.sha512("kafka-app", "s3cret").Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("login with the deleted credential: %v", err)
	}
	// The last credential deleted: the user keeps its rules, logs in no more,
	// and is described as having no credential.
	if _, err := changeUser(n.svc, &service.UserChange{Op: metadata.OpGrant, Name: "kafka-app", Rules: []security.Rule{{Allow: true, Op: security.OpDescribe, Topic: "x"}}}); err != nil {
		t.Fatal(err)
	}
	if altered, err := root.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "kafka-app", Mechanism: kadm.ScramSha256}}, nil); err != nil || altered.Error() != nil {
		t.Fatalf("delete SHA-256: %+v, %v", altered, err)
	}
	waitFor(t, 10*time.Second, "kafka-app without a credential", func() bool {
		u, err := n.svc.User("kafka-app")
		return err == nil && u != nil && !u.HasSHA256() && len(u.Rules) == 1
	})
	if err := cls.sha256("kafka-app", "other").Ping(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("login of a user without a credential: %v", err)
	}
	d, err = root.DescribeUserSCRAMs(ctx, "kafka-app")
	if err != nil || !errors.Is(d["kafka-app"].Err, kerr.ResourceNotFound) {
		t.Fatalf("describe a user without a credential: %+v, %v", d, err)
	}
	if all, err := root.DescribeUserSCRAMs(ctx); err != nil || len(all) != 1 {
		t.Fatalf("every user with a credential: %+v, %v; want root only", all, err)
	}
}
