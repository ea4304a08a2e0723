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

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/security"
)

// TestKafkaACLs drives the ACL APIs with kadm as an administrator would,
// and checks that what they store is what the broker enforces on a
// second SCRAM user: a created ALLOW lets it produce and read, a DENY on
// a prefix takes a topic from it although an ALLOW names it, a deleted
// ALLOW takes the topic away again; ACLs for a user not created yet hold
// once AlterUserScramCredentials gives it a credential; a binding no rule
// can say is INVALID_REQUEST with nothing stored; and the user, without
// the cluster permission, may not use the ACL APIs.
func TestKafkaACLs(t *testing.T) {
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
	kafkaCreate(t, ctx, root, "orders", 1, -1)
	kafkaCreate(t, ctx, root, "audit.log", 1, -1)

	// ACLs first, for a user that has no credential yet.
	created, err := root.CreateACLs(ctx, kadm.NewACLs().Allow("User:app").Topics("orders", "audit.log").Operations(kadm.OpWrite, kadm.OpRead))
	if err != nil || len(created) != 4 {
		t.Fatalf("create ALLOW: %+v, %v", created, err)
	}
	for _, c := range created {
		if c.Err != nil {
			t.Fatalf("create %+v: %v", c, c.Err)
		}
	}
	if altered, err := root.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "app", Mechanism: kadm.ScramSha512, Password: "apppw"}}); err != nil || altered.Error() != nil {
		t.Fatalf("give app a credential: %+v, %v", altered, err)
	}
	waitFor(t, 10*time.Second, "app's credential and four rules", func() bool {
		u, err := n.svc.User("app")
		return err == nil && u != nil && u.CredentialSHA512 != nil && len(u.Rules) == 4
	})
	app := cls.sha512("app", "apppw")
	produce := func(topic string) error {
		return app.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr()
	}
	if err := produce("orders"); err != nil {
		t.Fatalf("produce allowed by the ACL: %v", err)
	}
	if err := produce("audit.log"); err != nil {
		t.Fatalf("produce allowed by the ACL: %v", err)
	}

	// A DENY on the prefix wins over the ALLOW on the name.
	deny := kadm.NewACLs().Deny("User:app").Topics("audit.").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpWrite)
	if created, err := root.CreateACLs(ctx, deny); err != nil || created[0].Err != nil {
		t.Fatalf("create DENY: %+v, %v", created, err)
	}
	waitFor(t, 10*time.Second, "the deny applied", func() bool { return errors.Is(produce("audit.log"), kerr.TopicAuthorizationFailed) })
	if err := produce("orders"); err != nil {
		t.Fatalf("produce to a topic the deny does not cover: %v", err)
	}

	// DescribeACLs lists what was created, as Kafka's bindings.
	desc, err := root.DescribeACLs(ctx, kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Allow().Deny().AllowHosts().DenyHosts().Operations(kadm.OpAny))
	if err != nil || len(desc) != 1 || desc[0].Err != nil {
		t.Fatalf("describe: %+v, %v", desc, err)
	}
	type seen struct {
		name       string
		pattern    kadm.ACLPattern
		op         kadm.ACLOperation
		permission kmsg.ACLPermissionType
	}
	got := map[seen]bool{}
	for _, d := range desc[0].Described {
		if d.Principal != "User:app" || d.Host != "*" || d.Type != kmsg.ACLResourceTypeTopic {
			t.Fatalf("described %+v", d)
		}
		got[seen{d.Name, d.Pattern, d.Operation, d.Permission}] = true
	}
	lit, pre := kadm.ACLPatternLiteral, kadm.ACLPatternPrefixed
	allow, denyP := kmsg.ACLPermissionTypeAllow, kmsg.ACLPermissionTypeDeny
	for _, w := range []seen{{"orders", lit, kadm.OpWrite, allow}, {"orders", lit, kadm.OpRead, allow}, {"audit.log", lit, kadm.OpWrite, allow},
		{"audit.log", lit, kadm.OpRead, allow}, {"audit.", pre, kadm.OpWrite, denyP}} {
		if !got[w] {
			t.Fatalf("described %v, missing %+v", got, w)
		}
	}
	if len(got) != 5 {
		t.Fatalf("described %d bindings, want 5: %v", len(got), got)
	}
	// MATCH: what applies to audit.log.
	match, err := root.DescribeACLs(ctx, kadm.NewACLs().Topics("audit.log").ResourcePatternType(kadm.ACLPatternMatch).Allow().Deny().AllowHosts().DenyHosts().Operations(kadm.OpAny))
	if err != nil || len(match) != 1 || len(match[0].Described) != 3 {
		t.Fatalf("describe MATCH audit.log: %+v, %v; want its two ALLOWs and the prefix's DENY", match, err)
	}

	// Deleting the ALLOW to write orders takes the topic away.
	deleted, err := root.DeleteACLs(ctx, kadm.NewACLs().Allow("User:app").AllowHosts().Topics("orders").Operations(kadm.OpWrite))
	if err != nil || len(deleted) != 1 || deleted[0].Err != nil {
		t.Fatalf("delete: %+v, %v", deleted, err)
	}
	waitFor(t, 10*time.Second, "the deleted ACL revoked", func() bool { return errors.Is(produce("orders"), kerr.TopicAuthorizationFailed) })
	if u, _ := n.svc.User("app"); len(u.Rules) != 4 || u.Rules[0] == (security.Rule{Allow: true, Op: security.OpWrite, Topic: "orders"}) {
		t.Fatalf("app's rules after the delete: %v", u.Rules)
	}

	// Bindings no rule can say: refused one by one, nothing stored.
	bad := kmsg.NewPtrCreateACLsRequest()
	for _, c := range []func(*kmsg.CreateACLsRequestCreation){
		func(c *kmsg.CreateACLsRequestCreation) { c.Host = "10.0.0.1" },
		func(c *kmsg.CreateACLsRequestCreation) { c.Principal = "User:*" },
		func(c *kmsg.CreateACLsRequestCreation) { c.ResourceType = kmsg.ACLResourceTypeTransactionalId },
		func(c *kmsg.CreateACLsRequestCreation) { c.Operation = kmsg.ACLOperationAll },
		func(c *kmsg.CreateACLsRequestCreation) { c.ResourceType = kmsg.ACLResourceTypeCluster },
	} {
		cr := kmsg.NewCreateACLsRequestCreation()
		cr.ResourceType, cr.ResourceName, cr.Principal, cr.Host = kmsg.ACLResourceTypeTopic, "orders", "User:app", "*"
		cr.Operation, cr.PermissionType = kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
		c(&cr)
		bad.Creations = append(bad.Creations, cr)
	}
	resp, err := bad.RequestWith(ctx, rootCl)
	if err != nil || len(resp.Results) != len(bad.Creations) {
		t.Fatalf("refused creations: %+v, %v", resp, err)
	}
	for i, r := range resp.Results {
		if r.ErrorCode != kerr.InvalidRequest.Code || r.ErrorMessage == nil {
			t.Fatalf("creation %d (%+v): code %d %v, want INVALID_REQUEST with a message", i, bad.Creations[i], r.ErrorCode, r.ErrorMessage)
		}
	}
	if u, _ := n.svc.User("app"); len(u.Rules) != 4 {
		t.Fatalf("app's rules after the refusals: %v", u.Rules)
	}

	// app has no cluster permission: the ACL APIs are refused to it.
	appAdm := kadm.NewClient(app)
	if d, err := appAdm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Allow().Deny().AllowHosts().DenyHosts().Operations(kadm.OpAny)); !errors.Is(err, kerr.ClusterAuthorizationFailed) && (len(d) == 0 || !errors.Is(d[0].Err, kerr.ClusterAuthorizationFailed)) {
		t.Fatalf("describe without the cluster permission: %+v, %v", d, err)
	}
	res, err := appAdm.CreateACLs(ctx, kadm.NewACLs().Allow("User:app").Topics("x").Operations(kadm.OpRead))
	if !errors.Is(err, kerr.ClusterAuthorizationFailed) && (len(res) == 0 || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed)) {
		t.Fatalf("create without the cluster permission: %+v, %v", res, err)
	}
	// CLUSTER ALTER is the cluster rule: with it, app describes ACLs.
	if created, err := root.CreateACLs(ctx, kadm.NewACLs().Allow("User:app").Clusters().Operations(kadm.OpAlter)); err != nil || created[0].Err != nil {
		t.Fatalf("create CLUSTER ALTER: %+v, %v", created, err)
	}
	waitFor(t, 10*time.Second, "the cluster rule applied", func() bool {
		d, err := appAdm.DescribeACLs(ctx, kadm.NewACLs().Clusters().ResourcePatternType(kadm.ACLPatternAny).Allow().Deny().AllowHosts().DenyHosts().Operations(kadm.OpAny))
		return err == nil && len(d) == 1 && len(d[0].Described) == 1 && d[0].Described[0].Operation == kadm.OpAlter
	})
}

// TestKafkaACLsSecurityDisabled: with security.auth none nothing is
// authorized, so the ACL APIs answer SECURITY_DISABLED, as a Kafka broker
// without an authorizer, and store nothing; the SCRAM credential APIs
// are served.
func TestKafkaACLsSecurityDisabled(t *testing.T) {
	n := runNode(t, t.TempDir(), withKafka)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(kafkaClient(t, []string{n.KafkaAddr()}))
	created, err := adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:app").Topics("orders").Operations(kadm.OpRead))
	if !errors.Is(err, kerr.SecurityDisabled) && (len(created) != 1 || !errors.Is(created[0].Err, kerr.SecurityDisabled)) {
		t.Fatalf("create: %+v, %v", created, err)
	}
	d, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Allow().Deny().AllowHosts().DenyHosts().Operations(kadm.OpAny))
	if !errors.Is(err, kerr.SecurityDisabled) && (len(d) == 0 || !errors.Is(d[0].Err, kerr.SecurityDisabled)) {
		t.Fatalf("describe: %+v, %v", d, err)
	}
	if users, err := n.svc.ListUsers(); err != nil || len(users) != 0 {
		t.Fatalf("users after the refusals: %v, %v", users, err)
	}
	// The SCRAM credential APIs are served, as Kafka serves them without
	// SASL: credentials set up before SCRAM is turned on.
	if altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "later", Mechanism: kadm.ScramSha256, Password: "pw"}}); err != nil || altered.Error() != nil {
		t.Fatalf("upsert under auth none: %+v, %v", altered, err)
	}
	waitUser(t, n.svc, "later", true)
	if d, err := adm.DescribeUserSCRAMs(ctx); err != nil || len(d["later"].CredInfos) != 1 {
		t.Fatalf("describe under auth none: %+v, %v", d, err)
	}
}
