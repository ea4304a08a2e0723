package node

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/security"
)

// The HTTP API of a node with auth = scram: a login issues a token; no
// token, a forged or expired token, a deleted user's token and a token
// issued before a password change are 401 AUTHENTICATION_FAILED; a
// denied read, write and delete are 403 AUTHORIZATION_FAILED; users are
// managed over HTTP by the administrator only; failed logins are limited
// per address and counted in /metrics; and the node serves throughout.
func TestHTTPAuthentication(t *testing.T) {
	n := runNode(t, t.TempDir(), func(c *config.Config) {
		scramNode(c)
		c.Node.HTTPAddr = "127.0.0.1:0"
		c.HTTP.JWTSecret = "jwt-secret"
		c.Security.LoginFailuresMax = 4
	})
	waitUser(t, n.svc, "root", true)
	base := "http://" + n.HTTPAddr()
	login := func(user, pw string) (int, string) {
		code, out := httpDo(t, "POST", base+"/v1/login", map[string]string{"username": user, "password": pw}, nil)
		tok, _ := out["token"].(string)
		return code, tok
	}
	bearer := func(tok string) map[string]string { return map[string]string{"Authorization": "Bearer " + tok} }
	expect := func(what string, code, want int, raw []byte, wantCode string) {
		t.Helper()
		if code != want {
			t.Fatalf("%s: %d %s, want %d", what, code, raw, want)
		}
		if wantCode != "" {
			if c, _, _ := errorOf(t, raw); c != wantCode {
				t.Fatalf("%s: code %s, want %s", what, c, wantCode)
			}
		}
	}

	code, root := login("root", "rootpw")
	if code != http.StatusOK || root == "" {
		t.Fatalf("administrator login: %d", code)
	}
	for _, name := range []string{"orders", "payments"} {
		c, _, raw := httpRaw(t, "POST", base+"/v1/topics", `{"name":"`+name+`","partitions":1}`, bearer(root))
		expect("create "+name, c, http.StatusCreated, raw, "")
	}
	c, _, raw := httpRaw(t, "POST", base+"/v1/users", `{"name":"app","password":"apppw","rules":[{"allow":true,"op":"write","topic":"orders"}]}`, bearer(root))
	expect("create user app", c, http.StatusCreated, raw, "")
	if strings.Contains(string(raw), "stored_key") || strings.Contains(string(raw), "apppw") {
		t.Fatalf("a user answer shows the credential: %s", raw)
	}
	_, app := login("app", "apppw")

	c, _, raw = httpRaw(t, "GET", base+"/v1/topics", "", nil)
	expect("no token", c, http.StatusUnauthorized, raw, "AUTHENTICATION_FAILED")
	c, _, raw = httpRaw(t, "POST", base+"/v1/topics/orders/partitions/0/records", `{"records":[{"value_text":"a"}]}`, bearer(app))
	expect("allowed write", c, http.StatusOK, raw, "")
	c, _, raw = httpRaw(t, "POST", base+"/v1/topics/payments/partitions/0/records", `{"records":[{"value_text":"a"}]}`, bearer(app))
	expect("denied write", c, http.StatusForbidden, raw, "AUTHORIZATION_FAILED")
	c, _, raw = httpRaw(t, "GET", base+"/v1/topics/orders/partitions/0/records?offset=0", "", bearer(app))
	expect("denied read", c, http.StatusForbidden, raw, "AUTHORIZATION_FAILED")
	c, _, raw = httpRaw(t, "DELETE", base+"/v1/topics/orders", "", bearer(app))
	expect("denied delete", c, http.StatusForbidden, raw, "AUTHORIZATION_FAILED")
	c, _, raw = httpRaw(t, "GET", base+"/v1/users", "", bearer(app))
	expect("users listed by a user", c, http.StatusForbidden, raw, "AUTHORIZATION_FAILED")
	c, _, raw = httpRaw(t, "GET", base+"/v1/topics", "", bearer(app))
	if c != http.StatusOK || !strings.Contains(string(raw), "orders") || strings.Contains(string(raw), "payments") {
		t.Fatalf("app's topic list %d %s: want orders only", c, raw)
	}

	forged, _ := security.IssueToken([]byte("another secret"), "root", 1, time.Now(), time.Hour)
	c, _, raw = httpRaw(t, "GET", base+"/v1/topics", "", bearer(forged))
	expect("forged token", c, http.StatusUnauthorized, raw, "AUTHENTICATION_FAILED")
	expired, _ := security.IssueToken([]byte("jwt-secret"), "root", 1, time.Now().Add(-2*time.Hour), time.Hour)
	c, _, raw = httpRaw(t, "GET", base+"/v1/topics", "", bearer(expired))
	expect("expired token", c, http.StatusUnauthorized, raw, "AUTHENTICATION_FAILED")

	// A new password ends the tokens issued before it.
	c, _, raw = httpRaw(t, "PUT", base+"/v1/users/app/password", `{"password":"newpw"}`, bearer(app))
	expect("own password", c, http.StatusOK, raw, "")
	c, _, raw = httpRaw(t, "GET", base+"/v1/topics", "", bearer(app))
	expect("token issued before a new password", c, http.StatusUnauthorized, raw, "AUTHENTICATION_FAILED")
	_, app = login("app", "newpw")
	c, _, raw = httpRaw(t, "DELETE", base+"/v1/users/app", "", bearer(root))
	expect("delete user", c, http.StatusOK, raw, "")
	c, _, raw = httpRaw(t, "GET", base+"/v1/topics", "", bearer(app))
	expect("deleted user's token", c, http.StatusUnauthorized, raw, "AUTHENTICATION_FAILED")

	// Failed logins: forged and expired tokens counted 2, two wrong
	// passwords reach the limit of 4, then even the right one waits.
	if code, _ := login("root", "wrong"); code != http.StatusUnauthorized {
		t.Fatalf("wrong password: %d", code)
	}
	if code, _ := login("ghost", "x"); code != http.StatusUnauthorized {
		t.Fatalf("unknown user: %d", code)
	}
	c, _, raw = httpRaw(t, "POST", base+"/v1/login", `{"username":"root","password":"rootpw"}`, nil)
	expect("login after 4 failures", c, http.StatusUnauthorized, raw, "AUTHENTICATION_FAILED")
	if !strings.Contains(string(raw), "retry_after_ms") {
		t.Fatalf("a limited login gives no retry advice: %s", raw)
	}
	c, _, raw = httpRaw(t, "GET", base+"/metrics", "", nil)
	if c != http.StatusOK || !strings.Contains(string(raw), "corestream_logins_failed_total 4") || !strings.Contains(string(raw), "corestream_logins_refused_total 1") {
		t.Fatalf("metrics do not count the failures: %d\n%s", c, raw)
	}
	// The node serves the administrator's token throughout.
	c, _, raw = httpRaw(t, "GET", base+"/v1/topics/orders", "", bearer(root))
	expect("administrator after the refusals", c, http.StatusOK, raw, "")
}
