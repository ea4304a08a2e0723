package kafka

import (
	"errors"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/security"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio"
)

// The ACL APIs (KIP-140; prefixed patterns KIP-290) on the users'
// permission rules, through the mapping of aclmap.go: DescribeAcls lists
// every user's rules as bindings, CreateAcls grants rules, DeleteAcls
// revokes the rules its filters match. Versions 0-3, as Kafka 3.9 serves
// them (v0 has no pattern type: LITERAL). All three need the cluster
// permission (Kafka's DESCRIBE, and ALTER, on the cluster), else
// CLUSTER_AUTHORIZATION_FAILED; with security.auth = none, where nothing
// is authorized, they answer SECURITY_DISABLED, as a Kafka broker without
// an authorizer. A superuser's power is not a rule, and is not listed (as
// Kafka's super.users are not ACLs).
const (
	describeACLsKey int16 = 29
	createACLsKey   int16 = 30
	deleteACLsKey   int16 = 31
)

// aclsDisabled is the message of SECURITY_DISABLED.
var aclsDisabled = kmsg.StringPtr("security.auth is none: every client is a superuser and no permission is checked, so there are no ACLs")

// aclsAllowed answers whether this view may use the ACL APIs: 0, or the
// code and message refusing it.
func (l *Listener) aclsAllowed() (int16, *string) {
	if l.cfg.Auth == nil || l.users == nil {
		return kerr.SecurityDisabled.Code, aclsDisabled
	}
	return l.clusterAllowed()
}

// aclBindings is every user's rules as bindings, by user name then the
// rules' order.
func (l *Listener) aclBindings() ([]aclBinding, []security.Rule, []string, error) {
	users, err := l.users.ListUsers()
	if err != nil {
		return nil, nil, nil, err
	}
	var bs []aclBinding
	var rules []security.Rule
	var names []string
	for _, u := range users {
		for _, r := range u.Rules {
			bs = append(bs, bindingOfRule(u.Name, r))
			rules = append(rules, r)
			names = append(names, u.Name)
		}
	}
	return bs, rules, names, nil
}

func (l *Listener) describeACLs(req *kmsg.DescribeACLsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	if code, msg := l.aclsAllowed(); code != 0 {
		resp.ErrorCode, resp.ErrorMessage = code, msg
		return resp
	}
	f := aclFilter{resource: req.ResourceType, name: req.ResourceName, pattern: req.ResourcePatternType,
		principal: req.Principal, host: req.Host, op: req.Operation, permission: req.PermissionType}
	if err := f.check(); err != nil {
		resp.ErrorCode, resp.ErrorMessage = err.code, kmsg.StringPtr(err.msg)
		return resp
	}
	bs, _, _, err := l.aclBindings()
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		return resp
	}
	type key struct {
		t kmsg.ACLResourceType
		n string
		p kmsg.ACLResourcePatternType
	}
	at := make(map[key]int)
	for _, b := range bs {
		if !f.matches(b) {
			continue
		}
		k := key{b.resource, b.name, b.pattern}
		i, ok := at[k]
		if !ok {
			i = len(resp.Resources)
			at[k] = i
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName, r.ResourcePatternType = b.resource, b.name, b.pattern
			resp.Resources = append(resp.Resources, r)
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host, a.Operation, a.PermissionType = b.principal, b.host, b.op, b.permission
		resp.Resources[i].ACLs = append(resp.Resources[i].ACLs, a)
	}
	slices.SortStableFunc(resp.Resources, func(a, b kmsg.DescribeACLsResponseResource) int {
		if a.ResourceType != b.ResourceType {
			return int(a.ResourceType) - int(b.ResourceType)
		}
		if c := strings.Compare(a.ResourceName, b.ResourceName); c != 0 {
			return c
		}
		return int(a.ResourcePatternType) - int(b.ResourcePatternType)
	})
	return resp
}

// createACLs grants each binding's rule to its user; the bindings of one
// user are one change, made or refused together (a user CreateAcls names
// that does not exist is created without a credential: Kafka takes ACLs
// for principals before they have one). A binding no rule can say is
// refused alone, with the others made.
func (l *Listener) createACLs(c *netio.Conn, req *kmsg.CreateACLsRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	resp.Results = make([]kmsg.CreateACLsResponseResult, len(req.Creations))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewCreateACLsResponseResult()
	}
	if code, msg := l.aclsAllowed(); code != 0 {
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, msg
		}
		reply(resp)
		return
	}
	var order []string
	grants := make(map[string][]int) // user → indexes of its creations
	rules := make(map[string][]security.Rule)
	for i, cr := range req.Creations {
		user, r, err := ruleOfBinding(aclBinding{resource: cr.ResourceType, name: cr.ResourceName, pattern: cr.ResourcePatternType,
			principal: cr.Principal, host: cr.Host, op: cr.Operation, permission: cr.PermissionType})
		if err != nil {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = err.code, kmsg.StringPtr(err.msg)
			continue
		}
		if grants[user] == nil {
			order = append(order, user)
		}
		grants[user] = append(grants[user], i)
		if !slices.Contains(rules[user], r) {
			rules[user] = append(rules[user], r)
		}
	}
	pending := 1
	finish := func() {
		if pending--; pending == 0 {
			reply(resp)
		}
	}
	for _, user := range order {
		idx := grants[user]
		pending++
		l.users.ChangeUser(c.Shard(), &service.UserChange{Op: metadata.OpGrantACL, Name: user, Rules: rules[user]}, func(_ *metadata.User, err error) {
			code, msg := aclChangeError(err)
			for _, i := range idx {
				resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, msg
			}
			finish()
		})
	}
	finish()
}

// aclChangeError is the code and message of a user change's error.
func aclChangeError(err error) (int16, *string) {
	if errors.Is(err, service.ErrAuthorization) {
		return kerr.ClusterAuthorizationFailed.Code, clusterDenied(err)
	}
	return errorCode(err), errorMessage(err)
}

// deleteACLs revokes the rules each filter matches, answering for each
// filter the bindings it matched; a binding two filters match is
// revoked once and listed by both. One user's revocations are one
// change: a failed one marks each of its bindings with the error.
func (l *Listener) deleteACLs(c *netio.Conn, req *kmsg.DeleteACLsRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	resp.Results = make([]kmsg.DeleteACLsResponseResult, len(req.Filters))
	for i := range resp.Results {
		resp.Results[i] = kmsg.NewDeleteACLsResponseResult()
	}
	fail := func(code int16, msg *string) {
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = code, msg
		}
		reply(resp)
	}
	if code, msg := l.aclsAllowed(); code != 0 {
		fail(code, msg)
		return
	}
	bs, rs, names, err := l.aclBindings()
	if err != nil {
		fail(errorCode(err), errorMessage(err))
		return
	}
	type match struct{ filter, acl int }
	var order []string
	revoke := make(map[string][]security.Rule)
	byUser := make(map[string][]match)
	for fi, rf := range req.Filters {
		f := aclFilter{resource: rf.ResourceType, name: rf.ResourceName, pattern: rf.ResourcePatternType,
			principal: rf.Principal, host: rf.Host, op: rf.Operation, permission: rf.PermissionType}
		if err := f.check(); err != nil {
			resp.Results[fi].ErrorCode, resp.Results[fi].ErrorMessage = err.code, kmsg.StringPtr(err.msg)
			continue
		}
		for bi, b := range bs {
			if !f.matches(b) {
				continue
			}
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = b.resource, b.name, b.pattern
			m.Principal, m.Host, m.Operation, m.PermissionType = b.principal, b.host, b.op, b.permission
			res := &resp.Results[fi]
			res.MatchingACLs = append(res.MatchingACLs, m)
			user := names[bi]
			if byUser[user] == nil {
				order = append(order, user)
			}
			byUser[user] = append(byUser[user], match{fi, len(res.MatchingACLs) - 1})
			if !slices.Contains(revoke[user], rs[bi]) {
				revoke[user] = append(revoke[user], rs[bi])
			}
		}
	}
	pending := 1
	finish := func() {
		if pending--; pending == 0 {
			reply(resp)
		}
	}
	for _, user := range order {
		ms := byUser[user]
		pending++
		l.users.ChangeUser(c.Shard(), &service.UserChange{Op: metadata.OpRevoke, Name: user, Rules: revoke[user]}, func(_ *metadata.User, err error) {
			code, msg := aclChangeError(err)
			for _, m := range ms {
				a := &resp.Results[m.filter].MatchingACLs[m.acl]
				a.ErrorCode, a.ErrorMessage = code, msg
			}
			finish()
		})
	}
	finish()
}
