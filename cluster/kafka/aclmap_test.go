package kafka

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/cluster/security"
)

// TestACLRuleMapping: every shape of rule is one binding and back, and
// each binding no rule can say is INVALID_REQUEST with a message naming
// what.
func TestACLRuleMapping(t *testing.T) {
	rules := []security.Rule{
		{Allow: true, Op: security.OpRead, Topic: "orders"},
		{Allow: false, Op: security.OpWrite, Topic: "audit.", Prefix: true},
		{Allow: true, Op: security.OpDescribe, Prefix: true},
		{Allow: true, Op: security.OpCreate, Topic: "t"},
		{Allow: true, Op: security.OpDelete, Topic: "t"},
		{Allow: true, Op: security.OpRead, Topic: "billing", Group: true},
		{Allow: false, Op: security.OpDelete, Topic: "g.", Prefix: true, Group: true},
		{Allow: true, Op: security.OpDescribe, Prefix: true, Group: true},
		{Allow: true, Op: security.OpCluster},
		{Allow: false, Op: security.OpCluster},
	}
	for _, r := range rules {
		b := bindingOfRule("app", r)
		user, back, err := ruleOfBinding(b)
		if err != nil || user != "app" || back != r {
			t.Fatalf("%v → %+v → %s %v, %v", r, b, user, back, err)
		}
	}
	if b := bindingOfRule("app", rules[2]); b.name != "*" || b.pattern != kmsg.ACLResourcePatternTypeLiteral {
		t.Fatalf("every topic is %+v, want LITERAL *", b)
	}

	ok := aclBinding{resource: kmsg.ACLResourceTypeTopic, name: "orders", pattern: kmsg.ACLResourcePatternTypeLiteral,
		principal: "User:app", host: "*", op: kmsg.ACLOperationRead, permission: kmsg.ACLPermissionTypeAllow}
	for _, c := range []struct {
		change func(*aclBinding)
		says   string
	}{
		{func(b *aclBinding) { b.pattern = kmsg.ACLResourcePatternTypeMatch }, "patternType"},
		{func(b *aclBinding) { b.resource = kmsg.ACLResourceTypeAny }, "resourceType"},
		{func(b *aclBinding) { b.op = kmsg.ACLOperationAny }, "operation"},
		{func(b *aclBinding) { b.permission = kmsg.ACLPermissionTypeAny }, "permissionType"},
		{func(b *aclBinding) { b.name = "" }, "empty resource name"},
		{func(b *aclBinding) { b.resource, b.op = kmsg.ACLResourceTypeCluster, kmsg.ACLOperationAlter }, "kafka-cluster"},
		{func(b *aclBinding) { b.principal = "Group:app" }, "User:NAME"},
		{func(b *aclBinding) { b.principal = "User:*" }, "every user"},
		{func(b *aclBinding) { b.principal = "User:a,b" }, "letters"},
		{func(b *aclBinding) { b.host = "10.0.0.1" }, "every host"},
		{func(b *aclBinding) { b.op = kmsg.ACLOperationAlterConfigs }, "CREATE"},
		{func(b *aclBinding) { b.op = kmsg.ACLOperationAll }, "READ, WRITE"},
		{func(b *aclBinding) { b.resource, b.op = kmsg.ACLResourceTypeGroup, kmsg.ACLOperationWrite }, "READ, DESCRIBE and DELETE"},
		{func(b *aclBinding) {
			b.resource, b.name, b.op = kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLOperationDescribe
		}, "ALTER"},
		{func(b *aclBinding) {
			b.resource, b.name, b.pattern, b.op = kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLResourcePatternTypePrefixed, kmsg.ACLOperationAlter
		}, "LITERAL"},
		{func(b *aclBinding) { b.resource = kmsg.ACLResourceTypeTransactionalId }, "no TRANSACTIONAL_ID permission"},
		{func(b *aclBinding) { b.resource = kmsg.ACLResourceTypeUser }, "no USER permission"},
	} {
		b := ok
		c.change(&b)
		_, _, err := ruleOfBinding(b)
		if err == nil || err.code != kerr.InvalidRequest.Code || !strings.Contains(err.msg, c.says) {
			t.Fatalf("%+v: %v, want INVALID_REQUEST saying %q", b, err, c.says)
		}
	}
}

// TestACLFilter: Kafka's filter semantics over bindings: ANY and null
// match all, MATCH selects what applies to a name, a pattern type or a
// name selects exactly.
func TestACLFilter(t *testing.T) {
	lit := bindingOfRule("app", security.Rule{Allow: true, Op: security.OpRead, Topic: "orders"})
	pre := bindingOfRule("app", security.Rule{Allow: true, Op: security.OpRead, Topic: "ord", Prefix: true})
	all := bindingOfRule("app", security.Rule{Allow: true, Op: security.OpRead, Prefix: true})
	other := bindingOfRule("bob", security.Rule{Allow: false, Op: security.OpWrite, Topic: "payments"})
	any := aclFilter{resource: kmsg.ACLResourceTypeAny, pattern: kmsg.ACLResourcePatternTypeAny, op: kmsg.ACLOperationAny, permission: kmsg.ACLPermissionTypeAny}
	str := func(s string) *string { return &s }
	for _, c := range []struct {
		name   string
		change func(*aclFilter)
		want   [4]bool // lit, pre, all, other
	}{
		{"any", func(*aclFilter) {}, [4]bool{true, true, true, true}},
		{"match orders", func(f *aclFilter) { f.pattern, f.name = kmsg.ACLResourcePatternTypeMatch, str("orders") }, [4]bool{true, true, true, false}},
		{"any named ord", func(f *aclFilter) { f.name = str("ord") }, [4]bool{false, true, false, false}},
		{"literal", func(f *aclFilter) { f.pattern = kmsg.ACLResourcePatternTypeLiteral }, [4]bool{true, false, true, true}},
		{"principal bob", func(f *aclFilter) { f.principal = str("User:bob") }, [4]bool{false, false, false, true}},
		{"deny", func(f *aclFilter) { f.permission = kmsg.ACLPermissionTypeDeny }, [4]bool{false, false, false, true}},
		{"write", func(f *aclFilter) { f.op = kmsg.ACLOperationWrite }, [4]bool{false, false, false, true}},
		{"groups", func(f *aclFilter) { f.resource = kmsg.ACLResourceTypeGroup }, [4]bool{}},
		{"host", func(f *aclFilter) { f.host = str("10.0.0.1") }, [4]bool{}},
	} {
		f := any
		c.change(&f)
		if err := f.check(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for i, b := range []aclBinding{lit, pre, all, other} {
			if f.matches(b) != c.want[i] {
				t.Fatalf("%s: binding %+v matched %v, want %v", c.name, b, !c.want[i], c.want[i])
			}
		}
	}
	bad := any
	bad.op = kmsg.ACLOperationUnknown
	if err := bad.check(); err == nil || err.code != kerr.InvalidRequest.Code {
		t.Fatalf("an UNKNOWN operation in a filter: %v", err)
	}
}
