package security

import (
	"errors"
	"fmt"
	"strings"
)

// Op is an operation a permission rule allows or denies.
type Op string

// The operations. Read and write imply describe on the same topic
// (as in Kafka: a client that may read a topic must find its routes).
const (
	OpRead     Op = "read"
	OpWrite    Op = "write"
	OpCreate   Op = "create"
	OpDelete   Op = "delete"
	OpDescribe Op = "describe"
	// OpCluster covers the cluster operations: moving primaries,
	// rebalancing, managing users and permissions. It takes no topic.
	OpCluster Op = "cluster"
)

// Ops lists every operation.
var Ops = []Op{OpRead, OpWrite, OpCreate, OpDelete, OpDescribe, OpCluster}

// RulesPerUserMax bounds one user's permission rules.
const RulesPerUserMax = 1024

// Rule allows or denies one operation on topics: the topic named Topic,
// or, with Prefix, every topic whose name starts with Topic ("" then
// matches every topic). OpCluster rules have no topic. With Group the
// rule speaks of consumer groups instead (Kafka's group resource):
// Topic then names the group, or the prefix of group names, and Op is
// read (join, sync, heartbeat, commit and fetch offsets), describe
// (describe, list) or delete.
type Rule struct {
	Allow  bool   `json:"allow"`
	Op     Op     `json:"op"`
	Topic  string `json:"topic,omitempty"`
	Prefix bool   `json:"prefix,omitempty"`
	Group  bool   `json:"group,omitempty"`
}

// ErrInvalidRule: a rule names an unknown operation or a topic where it
// needs none.
var ErrInvalidRule = errors.New("security: invalid permission rule")

// Validate checks r.
func (r Rule) Validate() error {
	known := false
	for _, o := range Ops {
		known = known || o == r.Op
	}
	switch {
	case !known:
		return fmt.Errorf("%w: unknown operation %q (one of read, write, create, delete, describe, cluster)", ErrInvalidRule, r.Op)
	case r.Op == OpCluster && (r.Topic != "" || r.Prefix || r.Group):
		return fmt.Errorf("%w: a cluster rule names no topic or group", ErrInvalidRule)
	case r.Op != OpCluster && r.Topic == "" && !r.Prefix:
		return fmt.Errorf("%w: a topic rule names a topic, or a prefix (\"\" for every topic)", ErrInvalidRule)
	case r.Group && r.Op != OpRead && r.Op != OpDescribe && r.Op != OpDelete:
		return fmt.Errorf("%w: a group rule is about read, describe or delete, not %s", ErrInvalidRule, r.Op)
	}
	return nil
}

// String renders r as the CLI shows it: "allow write topic orders",
// "deny read prefix audit.", "allow cluster".
func (r Rule) String() string {
	verb := "deny"
	if r.Allow {
		verb = "allow"
	}
	switch {
	case r.Op == OpCluster:
		return verb + " cluster"
	case r.Group && r.Prefix:
		return fmt.Sprintf("%s %s group prefix %q", verb, r.Op, r.Topic)
	case r.Group:
		return fmt.Sprintf("%s %s group %s", verb, r.Op, r.Topic)
	case r.Prefix:
		return fmt.Sprintf("%s %s prefix %q", verb, r.Op, r.Topic)
	}
	return fmt.Sprintf("%s %s topic %s", verb, r.Op, r.Topic)
}

// matches reports whether r speaks of op on topic (a group's name when
// group).
func (r Rule) matches(op Op, topic string, group bool) bool {
	if r.Group != group {
		return false
	}
	if r.Op != op && !(op == OpDescribe && (r.Op == OpRead || r.Op == OpWrite) && r.Allow) {
		return false
	}
	if op == OpCluster {
		return true
	}
	if r.Prefix {
		return strings.HasPrefix(topic, r.Topic)
	}
	return r.Topic == topic
}

// Principal is who a connection or request authenticated as.
type Principal struct {
	// User is the user's name; "" is the anonymous principal of a node
	// whose security.auth is "none".
	User string
	// Superuser may do everything: the anonymous principal when auth is
	// none, and users created as administrators.
	Superuser bool
}

// Anonymous is the principal of every caller when auth is "none".
var Anonymous = Principal{Superuser: true}

// String names p in messages and logs.
func (p Principal) String() string {
	if p.User == "" {
		return "anonymous"
	}
	return "user " + p.User
}

// Allowed decides whether rules let a caller do op on topic: a matching
// deny wins over any allow; with no matching allow the answer is no.
func Allowed(rules []Rule, op Op, topic string) bool {
	return allowed(rules, op, topic, false)
}

// AllowedGroup decides whether rules let a caller do op on the consumer
// group named group, as Allowed does for topics: only group rules speak
// of groups.
func AllowedGroup(rules []Rule, op Op, group string) bool {
	return allowed(rules, op, group, true)
}

func allowed(rules []Rule, op Op, name string, group bool) bool {
	allowed := false
	for _, r := range rules {
		if !r.matches(op, name, group) {
			continue
		}
		if !r.Allow {
			return false
		}
		allowed = true
	}
	return allowed
}
