package httpapi

import (
	"crypto/rand"
	"encoding/json"
	"io/fs"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/security"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio/wire/scram"
)

// fakeUsers holds one superuser; it answers User and nothing else.
type fakeUsers struct {
	service.Users
	root *metadata.User
}

func (f *fakeUsers) User(name string) (*metadata.User, error) {
	if name == f.root.Name {
		return f.root, nil
	}
	return nil, nil
}

// With security.auth = scram the console's page and assets are served
// without a token (the page must load to show its login form), its data
// routes answer 401 until it logs in, and the token from POST /v1/login
// opens them. The script sends that token and keeps it in the tab's
// sessionStorage, never in localStorage.
func TestConsoleWithAuth(t *testing.T) {
	cred, err := scram.SHA256.NewCredential("rootpw", 4096, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	users := &fakeUsers{root: &metadata.User{Name: "root", Credential: cred, Superuser: true, Generation: 1}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	svc := &fakeService{self: 1, topics: fakeTopics(1, 2, 1), logOf: func(string, int32) int64 { return 5 }}
	h := New(Config{Service: svc, Self: 1, JWTSecret: "j", HTTPAddrOf: func(int32) string { return "" },
		Auth: &Auth{Users: users, Limiter: security.NewLimiter(100, time.Minute), TokenTTL: time.Hour, Now: time.Now}}, ln)
	h.Serve()
	t.Cleanup(func() { h.Close() })
	base := "http://" + h.Addr()

	for _, path := range []string{"/", "/console/console.js", "/console/console.css"} {
		if status, _, body := get(t, base+path); status != 200 || len(body) == 0 {
			t.Errorf("GET %s without a token: %d, %d bytes; the console must load to show its login", path, status, len(body))
		}
	}
	status, _, body := get(t, base+"/v1/partitions")
	if status != http.StatusUnauthorized || !strings.Contains(string(body), "AUTHENTICATION_FAILED") {
		t.Fatalf("GET /v1/partitions without a token: %d %s; want 401, which the console answers with its login", status, body)
	}
	resp, err := http.Post(base+"/v1/login", "application/json", strings.NewReader(`{"username":"root","password":"rootpw"}`))
	if err != nil {
		t.Fatal(err)
	}
	var login loginAnswer
	if err := json.NewDecoder(resp.Body).Decode(&login); err != nil || resp.StatusCode != 200 || login.Token == "" {
		t.Fatalf("POST /v1/login: %d %+v %v", resp.StatusCode, login, err)
	}
	resp.Body.Close()
	req, _ := http.NewRequest("GET", base+"/v1/partitions", nil)
	req.Header.Set("Authorization", "Bearer "+login.Token)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /v1/partitions with the login's token: %d", resp.StatusCode)
	}

	// The script's side: it logs in, sends the token, keeps it only for
	// the tab, and the page has the form it fills.
	js, _ := fs.ReadFile(consoleFS, "console.js")
	for _, want := range []string{`"/v1/login"`, `"Authorization"`, `"Bearer "`, "sessionStorage.setItem", "sessionStorage.removeItem", "resp.status === 401"} {
		if !strings.Contains(string(js), want) {
			t.Errorf("console.js lacks %s", want)
		}
	}
	if strings.Contains(string(js), "localStorage.") {
		t.Error("console.js uses localStorage: a token there outlives the tab")
	}
	page, _ := fs.ReadFile(consoleFS, "index.html")
	for _, id := range []string{"login", "login-user", "login-password", "login-submit", "logout"} {
		if !regexp.MustCompile(`id="` + id + `"`).Match(page) {
			t.Errorf("index.html has no element %s", id)
		}
	}
}
