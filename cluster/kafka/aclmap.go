package kafka

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/cluster/security"
	"github.com/corestream/corestream/netio/wire/scram"
)

// Kafka's ACL bindings are corestream's permission rules
// (security.Rule) seen from Kafka: one binding is one rule on one user,
// and back (docs/kafka.md "ACLs", docs/security.md):
//
//	binding                                 rule on user NAME
//	User:NAME, host *                       (the user; every host)
//	ALLOW / DENY                            Allow true / false
//	TOPIC LITERAL t, PREFIXED p, LITERAL *  topic t, prefix p, prefix ""
//	  READ WRITE CREATE DELETE DESCRIBE     read write create delete describe
//	GROUP (the same patterns)               Group, the same names
//	  READ DESCRIBE DELETE                  read describe delete
//	CLUSTER kafka-cluster LITERAL ALTER     cluster
//
// What Kafka says that no rule can is refused, INVALID_REQUEST with a
// message naming it: a host other than *, a principal other than
// User:NAME (User:* included), the resource types TRANSACTIONAL_ID,
// DELEGATION_TOKEN and USER, and each operation the table lacks (a
// topic's ALTER and ALTER_CONFIGS are corestream's create, its
// DESCRIBE_CONFIGS describe; the cluster's one rule is ALTER).

// aclClusterName is the one name of Kafka's cluster resource.
const aclClusterName = "kafka-cluster"

// aclPrincipalPrefix starts every principal a binding names.
const aclPrincipalPrefix = "User:"

// aclBinding is one ACL as Kafka's messages carry it.
type aclBinding struct {
	resource   kmsg.ACLResourceType
	name       string
	pattern    kmsg.ACLResourcePatternType
	principal  string
	host       string
	op         kmsg.ACLOperation
	permission kmsg.ACLPermissionType
}

// aclError is a binding or filter refused: its Kafka code and message.
type aclError struct {
	code int16
	msg  string
}

func (e *aclError) Error() string { return e.msg }

func invalidACL(format string, args ...any) *aclError {
	return &aclError{code: kerr.InvalidRequest.Code, msg: fmt.Sprintf(format, args...)}
}

var topicACLOps = map[kmsg.ACLOperation]security.Op{
	kmsg.ACLOperationRead: security.OpRead, kmsg.ACLOperationWrite: security.OpWrite, kmsg.ACLOperationCreate: security.OpCreate,
	kmsg.ACLOperationDelete: security.OpDelete, kmsg.ACLOperationDescribe: security.OpDescribe,
}

var groupACLOps = map[kmsg.ACLOperation]security.Op{
	kmsg.ACLOperationRead: security.OpRead, kmsg.ACLOperationDescribe: security.OpDescribe, kmsg.ACLOperationDelete: security.OpDelete,
}

// ruleOfBinding is the user and rule b means, or why no rule can say it.
// The checks run in the order of Kafka's (the binding's own validity
// first: codes ANY or UNKNOWN, an empty name, the cluster's name), then
// corestream's limits.
func ruleOfBinding(b aclBinding) (string, security.Rule, *aclError) {
	var r security.Rule
	switch b.pattern {
	case kmsg.ACLResourcePatternTypeLiteral, kmsg.ACLResourcePatternTypePrefixed:
	default:
		return "", r, invalidACL("Invalid patternType %s: an ACL's pattern is LITERAL or PREFIXED", b.pattern)
	}
	switch b.resource {
	case kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup, kmsg.ACLResourceTypeCluster,
		kmsg.ACLResourceTypeTransactionalId, kmsg.ACLResourceTypeDelegationToken, kmsg.ACLResourceTypeUser:
	default:
		return "", r, invalidACL("Invalid resourceType %s", b.resource)
	}
	if b.op <= kmsg.ACLOperationAny || b.op > kmsg.ACLOperationDescribeTokens {
		return "", r, invalidACL("Invalid operation %s", b.op)
	}
	if b.permission != kmsg.ACLPermissionTypeAllow && b.permission != kmsg.ACLPermissionTypeDeny {
		return "", r, invalidACL("Invalid permissionType %s: an ACL allows or denies", b.permission)
	}
	if b.name == "" {
		return "", r, invalidACL("Invalid empty resource name")
	}
	if b.resource == kmsg.ACLResourceTypeCluster && b.name != aclClusterName {
		return "", r, invalidACL("The only valid name for the CLUSTER resource is %s", aclClusterName)
	}
	user, ok := strings.CutPrefix(b.principal, aclPrincipalPrefix)
	switch {
	case !ok:
		return "", r, invalidACL("principal %q: corestream's principals are its users, User:NAME", b.principal)
	case user == "*":
		return "", r, invalidACL("principal User:* (every user) has no corestream rule: grant each user, or make it a superuser")
	}
	if err := scram.ValidateUsername(user); err != nil {
		return "", r, invalidACL("principal %q: %v", b.principal, err)
	}
	if b.host != "*" {
		return "", r, invalidACL("host %q: corestream's permissions hold for a user from every host; the host must be *", b.host)
	}
	r.Allow = b.permission == kmsg.ACLPermissionTypeAllow
	switch b.resource {
	case kmsg.ACLResourceTypeCluster:
		if b.op != kmsg.ACLOperationAlter || b.pattern != kmsg.ACLResourcePatternTypeLiteral {
			return "", r, invalidACL("cluster %s %s: corestream's cluster permission is one rule, every cluster operation at once (ALTER, and the DESCRIBE it implies); grant ALTER on the LITERAL kafka-cluster", b.pattern, b.op)
		}
		r.Op = security.OpCluster
		return user, r, nil
	case kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup:
		ops := topicACLOps
		if b.resource == kmsg.ACLResourceTypeGroup {
			ops, r.Group = groupACLOps, true
		}
		op, ok := ops[b.op]
		if !ok {
			return "", r, invalidACL("%s %s: corestream's %s rules are %s", b.resource, b.op, strings.ToLower(b.resource.String()), aclOpsHint(b.resource))
		}
		r.Op = op
	default:
		return "", r, invalidACL("resource type %s: corestream has no %s permission (no transactions, delegation tokens or quotas)", b.resource, b.resource)
	}
	switch {
	case b.pattern == kmsg.ACLResourcePatternTypePrefixed:
		r.Topic, r.Prefix = b.name, true
	case b.name == "*":
		r.Prefix = true
	default:
		r.Topic = b.name
	}
	return user, r, nil
}

func aclOpsHint(t kmsg.ACLResourceType) string {
	if t == kmsg.ACLResourceTypeGroup {
		return "READ, DESCRIBE and DELETE"
	}
	return "READ, WRITE, CREATE, DELETE and DESCRIBE (a topic's ALTER and ALTER_CONFIGS are its CREATE, its DESCRIBE_CONFIGS its DESCRIBE)"
}

// bindingOfRule is user's rule r as Kafka's binding; every rule has one.
func bindingOfRule(user string, r security.Rule) aclBinding {
	b := aclBinding{principal: aclPrincipalPrefix + user, host: "*", pattern: kmsg.ACLResourcePatternTypeLiteral,
		permission: kmsg.ACLPermissionTypeDeny, name: r.Topic}
	if r.Allow {
		b.permission = kmsg.ACLPermissionTypeAllow
	}
	ops := topicACLOps
	b.resource = kmsg.ACLResourceTypeTopic
	if r.Group {
		ops, b.resource = groupACLOps, kmsg.ACLResourceTypeGroup
	}
	switch {
	case r.Op == security.OpCluster:
		b.resource, b.name, b.op = kmsg.ACLResourceTypeCluster, aclClusterName, kmsg.ACLOperationAlter
		return b
	case r.Prefix && r.Topic == "":
		b.name = "*"
	case r.Prefix:
		b.pattern = kmsg.ACLResourcePatternTypePrefixed
	}
	for k, op := range ops {
		if op == r.Op {
			b.op = k
		}
	}
	return b
}

// aclFilter selects bindings, as DescribeAcls and DeleteAcls send it.
type aclFilter struct {
	resource   kmsg.ACLResourceType
	name       *string
	pattern    kmsg.ACLResourcePatternType
	principal  *string
	host       *string
	op         kmsg.ACLOperation
	permission kmsg.ACLPermissionType
}

// check refuses a filter with an UNKNOWN code (or one out of range), as
// Kafka refuses it: INVALID_REQUEST.
func (f aclFilter) check() *aclError {
	switch {
	case f.resource <= kmsg.ACLResourceTypeUnknown || f.resource > kmsg.ACLResourceTypeUser:
		return invalidACL("Invalid resourceType %s in the filter", f.resource)
	case f.pattern <= kmsg.ACLResourcePatternTypeUnknown || f.pattern > kmsg.ACLResourcePatternTypePrefixed:
		return invalidACL("Invalid patternType %s in the filter", f.pattern)
	case f.op <= kmsg.ACLOperationUnknown || f.op > kmsg.ACLOperationDescribeTokens:
		return invalidACL("Invalid operation %s in the filter", f.op)
	case f.permission <= kmsg.ACLPermissionTypeUnknown || f.permission > kmsg.ACLPermissionTypeAllow:
		return invalidACL("Invalid permissionType %s in the filter", f.permission)
	}
	return nil
}

// matches reports whether f selects b, as Kafka's filters do: ANY and a
// null field match everything; MATCH with a name selects the bindings
// that apply to that resource (the literal name, the literal *, and the
// prefixes of the name); ANY with a name selects that exact name in any
// pattern.
func (f aclFilter) matches(b aclBinding) bool {
	if f.resource != kmsg.ACLResourceTypeAny && f.resource != b.resource {
		return false
	}
	switch {
	case f.pattern == kmsg.ACLResourcePatternTypeMatch:
		if f.name != nil {
			n := *f.name
			if b.pattern == kmsg.ACLResourcePatternTypeLiteral && b.name != n && b.name != "*" {
				return false
			}
			if b.pattern == kmsg.ACLResourcePatternTypePrefixed && !strings.HasPrefix(n, b.name) {
				return false
			}
		}
	case f.pattern != kmsg.ACLResourcePatternTypeAny && f.pattern != b.pattern:
		return false
	case f.name != nil && *f.name != b.name:
		return false
	}
	return (f.principal == nil || *f.principal == b.principal) &&
		(f.host == nil || *f.host == b.host) &&
		(f.op == kmsg.ACLOperationAny || f.op == b.op) &&
		(f.permission == kmsg.ACLPermissionTypeAny || f.permission == b.permission)
}
