package httpapi

import (
	"net/http"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/security"
	"github.com/corestream/corestream/cluster/service"
)

// The user routes (docs/http.md, docs/security.md): list, create and
// delete users, set a password, grant and revoke permission rules.
// Changes run on the metadata primary (forwarded there in one hop, as
// topic changes are). Listing and changing users is a cluster
// operation; a user may always set their own password. No answer holds
// a credential.

func (h *API) registerUsers() {
	if h.users == nil {
		return
	}
	h.mux.HandleFunc("GET /v1/users", h.listUsers)
	h.mux.HandleFunc("POST /v1/users", h.createUser)
	h.mux.HandleFunc("DELETE /v1/users/{user}", h.userChange(metadata.OpDeleteUser))
	h.mux.HandleFunc("PUT /v1/users/{user}/password", h.userChange(metadata.OpSetPassword))
	h.mux.HandleFunc("POST /v1/users/{user}/grant", h.userChange(metadata.OpGrant))
	h.mux.HandleFunc("POST /v1/users/{user}/revoke", h.userChange(metadata.OpRevoke))
}

// userAnswer is a user without its credential.
type userAnswer struct {
	Name       string          `json:"name"`
	Superuser  bool            `json:"superuser"`
	Generation int64           `json:"generation"`
	Rules      []security.Rule `json:"rules"`
}

type userList struct {
	Users []userAnswer `json:"users"`
}

func (userAnswer) httpAnswer() {}
func (userList) httpAnswer()   {}

// createUserBody is POST /v1/users's body.
type createUserBody struct {
	Name      string          `json:"name"`
	Password  string          `json:"password"`
	Superuser bool            `json:"superuser"`
	Rules     []security.Rule `json:"rules"`
}

// userChangeBody is the body of the other changes: password for PUT
// …/password, rules for grant and revoke.
type userChangeBody struct {
	Password string          `json:"password"`
	Rules    []security.Rule `json:"rules"`
}

func answerOf(u *metadata.User) userAnswer {
	a := userAnswer{Name: u.Name, Superuser: u.Superuser, Generation: u.Generation, Rules: u.Rules}
	if a.Rules == nil {
		a.Rules = []security.Rule{}
	}
	return a
}

func (h *API) listUsers(w http.ResponseWriter, r *http.Request) {
	if err := checkQuery(r.URL.Query()); err != nil {
		h.fail(w, err)
		return
	}
	us, err := h.usersOf(r).ListUsers()
	if err != nil {
		h.fail(w, err)
		return
	}
	out := userList{Users: make([]userAnswer, 0, len(us))}
	for _, u := range us {
		out.Users = append(out.Users, answerOf(u))
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *API) createUser(w http.ResponseWriter, r *http.Request) {
	var req createUserBody
	body, ok := h.readJSON(w, r, &req)
	if !ok {
		return
	}
	h.changeUser(w, r, body, http.StatusCreated, &service.UserChange{Op: metadata.OpCreateUser, Name: req.Name,
		Password: req.Password, Superuser: req.Superuser, Rules: req.Rules})
}

// userChange serves the changes of one existing user.
func (h *API) userChange(op metadata.Op) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		var req userChangeBody
		if op != metadata.OpDeleteUser {
			var ok bool
			if body, ok = h.readJSON(w, r, &req); !ok {
				return
			}
		} else if err := checkQuery(r.URL.Query()); err != nil {
			h.fail(w, err)
			return
		}
		h.changeUser(w, r, body, http.StatusOK, &service.UserChange{Op: op, Name: r.PathValue("user"), Password: req.Password, Rules: req.Rules})
	}
}

// changeUser runs req on the metadata primary and answers the user.
func (h *API) changeUser(w http.ResponseWriter, r *http.Request, body []byte, status int, req *service.UserChange) {
	users := h.usersOf(r)
	if !h.onMetadataPrimary(w, r, body) {
		return
	}
	u, err := await(func(done func(*metadata.User, error)) { users.ChangeUser(nil, req, done) })
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, status, answerOf(u))
}
