package kafka

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/netio/wire/scram"
)

// The SCRAM credential APIs (KIP-554) on the cluster's users
// (docs/kafka.md, docs/security.md): DescribeUserScramCredentials lists
// each user's mechanisms and iteration counts, never a key;
// AlterUserScramCredentials sets or deletes one mechanism's credential
// from the salted password the client derived, so the password never
// reaches the broker. Both need the cluster permission (Kafka's Describe
// and Alter on the cluster; corestream has one rule for both).
const (
	describeUserScramCredentialsKey int16 = 50
	alterUserScramCredentialsKey    int16 = 51
)

// Kafka's SCRAM mechanism numbers, and its iteration bounds (both
// mechanisms): fewer is refused as weak, more as a cost on every login.
const (
	scramMechanismSHA256 int8  = 1
	scramMechanismSHA512 int8  = 2
	scramIterationsMin   int32 = 4096
	scramIterationsMax   int32 = 16384
)

func scramMechanism(n int8) *scram.Mechanism {
	switch n {
	case scramMechanismSHA256:
		return scram.SHA256
	case scramMechanismSHA512:
		return scram.SHA512
	}
	return nil
}

// clusterDenied is the message of a CLUSTER_AUTHORIZATION_FAILED answer.
func clusterDenied(err error) *string {
	return kmsg.StringPtr(fmt.Sprintf("cluster authorization failed: %v", err))
}

// describeUserScramCredentials answers each user named (null or empty:
// every user with a credential, by name) with its mechanisms, as Kafka's
// controller: a user named twice is DUPLICATE_RESOURCE once, one with no
// credential (absent, or whose credentials were all deleted)
// RESOURCE_NOT_FOUND.
func (l *Listener) describeUserScramCredentials(req *kmsg.DescribeUserSCRAMCredentialsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if l.users == nil {
		resp.ErrorCode, resp.ErrorMessage = kerr.UnknownServerError.Code, kmsg.StringPtr("this listener has no users to describe")
		return resp
	}
	all, err := l.users.ListUsers()
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		if errors.Is(err, service.ErrAuthorization) {
			resp.ErrorCode, resp.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, clusterDenied(err)
		}
		return resp
	}
	known := make(map[string]*metadata.User, len(all))
	for _, u := range all {
		known[u.Name] = u
	}
	infos := func(u *metadata.User) []kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo {
		var out []kmsg.DescribeUserSCRAMCredentialsResponseResultCredentialInfo
		for _, m := range []int8{scramMechanismSHA256, scramMechanismSHA512} {
			if c, ok := u.CredentialOf(scramMechanism(m)); ok {
				ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
				ci.Mechanism, ci.Iterations = m, int32(c.Iterations)
				out = append(out, ci)
			}
		}
		return out
	}
	if len(req.Users) == 0 {
		for _, u := range all {
			if ci := infos(u); len(ci) > 0 {
				r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
				r.User, r.CredentialInfos = u.Name, ci
				resp.Results = append(resp.Results, r)
			}
		}
		return resp
	}
	first, dup := byName(len(req.Users), func(i int) string { return req.Users[i].Name })
	for _, i := range first {
		name := req.Users[i].Name
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = name
		switch {
		case dup[name]:
			r.ErrorCode = kerr.DuplicateResource.Code
			r.ErrorMessage = kmsg.StringPtr("Cannot describe SCRAM credentials for the same user twice in a single request: " + name)
		case known[name] == nil || len(infos(known[name])) == 0:
			r.ErrorCode = kerr.ResourceNotFound.Code
			r.ErrorMessage = kmsg.StringPtr("Attempt to describe a user credential that does not exist: " + name)
		default:
			r.CredentialInfos = infos(known[name])
		}
		resp.Results = append(resp.Results, r)
	}
	return resp
}

// alterUserScramCredentials applies each user's one change, as Kafka's
// controller: a user altered twice in one request (two mechanisms, or a
// deletion and an upsertion) is DUPLICATE_RESOURCE and none of its
// changes is made; an empty name or bad iterations UNACCEPTABLE_CREDENTIAL,
// a mechanism other than 1 (SCRAM-SHA-256) or 2 (SCRAM-SHA-512)
// UNSUPPORTED_SASL_MECHANISM, a deletion of a credential the user lacks
// RESOURCE_NOT_FOUND. Stricter than Kafka, because these users are also
// the native protocol's and HTTP's: a name outside corestream's rule
// ([a-zA-Z0-9._@-], at most 128 bytes), a salted password not of the
// mechanism's hash size, or an empty salt is UNACCEPTABLE_CREDENTIAL.
// An upsertion for a user that does not exist creates it, with no rules.
func (l *Listener) alterUserScramCredentials(c *netio.Conn, req *kmsg.AlterUserSCRAMCredentialsRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	type change struct {
		ch   metadata.ScramChange
		code int16
		msg  string
	}
	var order []string
	changes := make(map[string]*change)
	add := func(name string, set func(*change) (int16, string)) {
		ch := changes[name]
		switch {
		case ch == nil:
			ch = &change{ch: metadata.ScramChange{Name: name}}
			changes[name] = ch
			order = append(order, name)
		case ch.code != 0:
			return
		default:
			ch.code, ch.msg = kerr.DuplicateResource.Code, "A user credential cannot be altered twice in the same request"
			return
		}
		ch.code, ch.msg = set(ch)
	}
	for _, d := range req.Deletions {
		add(d.Name, func(ch *change) (int16, string) {
			m := scramMechanism(d.Mechanism)
			if code, msg := checkScramName(d.Name, m); code != 0 {
				return code, msg
			}
			ch.ch.DeleteSHA256, ch.ch.DeleteSHA512 = m == scram.SHA256, m == scram.SHA512
			return 0, ""
		})
	}
	for _, u := range req.Upsertions {
		add(u.Name, func(ch *change) (int16, string) {
			m := scramMechanism(u.Mechanism)
			if code, msg := checkScramName(u.Name, m); code != 0 {
				return code, msg
			}
			switch {
			case u.Iterations < scramIterationsMin:
				return kerr.UnacceptableCredential.Code, "Too few iterations"
			case u.Iterations > scramIterationsMax:
				return kerr.UnacceptableCredential.Code, "Too many iterations"
			}
			cred, err := m.CredentialFromSalted(u.SaltedPassword, u.Salt, int(u.Iterations))
			if err != nil {
				return kerr.UnacceptableCredential.Code, err.Error()
			}
			if m == scram.SHA256 {
				ch.ch.SHA256 = &cred
			} else {
				ch.ch.SHA512 = &cred
			}
			return 0, ""
		})
	}
	resp.Results = make([]kmsg.AlterUserSCRAMCredentialsResponseResult, len(order))
	for i, name := range order {
		resp.Results[i] = kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		resp.Results[i].User = name
	}
	if l.users == nil {
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.UnknownServerError.Code, kmsg.StringPtr("this listener has no users to alter")
		}
		reply(resp)
		return
	}
	// Kafka authorizes the request before looking at its changes.
	if _, err := l.users.ListUsers(); errors.Is(err, service.ErrAuthorization) {
		for i := range resp.Results {
			resp.Results[i].ErrorCode, resp.Results[i].ErrorMessage = kerr.ClusterAuthorizationFailed.Code, clusterDenied(err)
		}
		reply(resp)
		return
	}
	pending := 1
	finish := func() {
		if pending--; pending == 0 {
			reply(resp)
		}
	}
	for i, name := range order {
		ch, r := changes[name], &resp.Results[i]
		if ch.code != 0 {
			r.ErrorCode, r.ErrorMessage = ch.code, kmsg.StringPtr(ch.msg)
			continue
		}
		pending++
		sc := ch.ch
		l.users.ChangeUser(c.Shard(), &service.UserChange{Op: metadata.OpAlterScram, Name: name, Scram: &sc}, func(_ *metadata.User, err error) {
			r.ErrorCode, r.ErrorMessage = errorCode(err), errorMessage(err)
			switch {
			case errors.Is(err, service.ErrAuthorization):
				r.ErrorCode, r.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, clusterDenied(err)
			case errors.Is(err, service.ErrUnknownUser):
				r.ErrorMessage = kmsg.StringPtr("Attempt to delete a user credential that does not exist: " + err.Error())
			case errors.Is(err, service.ErrInvalidRequest):
				r.ErrorCode = kerr.UnacceptableCredential.Code
			}
			finish()
		})
	}
	finish()
}

// checkScramName is the code and message refusing a change for name with
// m (nil: a mechanism number Kafka does not know), or 0.
func checkScramName(name string, m *scram.Mechanism) (int16, string) {
	switch {
	case name == "":
		return kerr.UnacceptableCredential.Code, "Username must not be empty"
	case m == nil:
		return kerr.UnsupportedSaslMechanism.Code, "Unknown SCRAM mechanism"
	}
	if err := scram.ValidateUsername(name); err != nil {
		return kerr.UnacceptableCredential.Code, err.Error()
	}
	return 0, ""
}
