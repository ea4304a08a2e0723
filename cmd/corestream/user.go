package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/spf13/cobra"
)

// The user commands manage the cluster's users and their permissions
// (docs/security.md) through a node's HTTP API (--http), logging in as
// --user first when it is set.

// Environment variables of the security flags.
const (
	envUser     = "CORESTREAM_USER"
	envPassword = "CORESTREAM_PASSWORD"
	envHTTP     = "CORESTREAM_HTTP"
	defaultHTTP = "127.0.0.1:7072"
)

func init() { commands = append(commands, newUserCmd) }

func newUserCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "user", Short: "create, list and delete users; set passwords; grant and revoke permissions (over --http)", RunE: groupRun}
	cmd.PersistentFlags().String("http", "", "a node's HTTP address HOST:PORT, or https://HOST:PORT for a node with TLS (default $"+envHTTP+" or "+defaultHTTP+")")
	cmd.AddCommand(newUserCreateCmd(), newUserListCmd(), newUserDeleteCmd(), newUserPasswdCmd(),
		newUserRuleCmd("grant", "allow (or with --deny, deny) an operation"), newUserRuleCmd("revoke", "remove a rule granted before"))
	return cmd
}

// userJSON is a user as the HTTP API answers it.
type userJSON struct {
	Name       string     `json:"name"`
	Superuser  bool       `json:"superuser"`
	Generation int64      `json:"generation"`
	Rules      []ruleJSON `json:"rules"`
}

// ruleJSON is a permission rule (security.Rule's JSON).
type ruleJSON struct {
	Allow  bool   `json:"allow"`
	Op     string `json:"op"`
	Topic  string `json:"topic,omitempty"`
	Prefix bool   `json:"prefix,omitempty"`
	Group  bool   `json:"group,omitempty"`
}

func (r ruleJSON) String() string {
	verb := "deny"
	if r.Allow {
		verb = "allow"
	}
	switch {
	case r.Op == "cluster":
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

// httpAPI calls a node's HTTP API as the CLI's user.
type httpAPI struct {
	base  string
	token string
	c     *http.Client
}

// userAPI connects to --http and logs in as --user (when set).
func userAPI(ctx context.Context, cmd *cobra.Command, a *app) (*httpAPI, error) {
	addr, _ := cmd.Flags().GetString("http")
	if addr == "" {
		addr = a.getenv(envHTTP)
	}
	if addr == "" {
		addr = defaultHTTP
	}
	base := addr
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		base = "http://" + base
	}
	h := &httpAPI{base: strings.TrimSuffix(base, "/"), c: &http.Client{Timeout: a.timeout}}
	if a.user == "" {
		return h, nil
	}
	var out struct {
		Token string `json:"token"`
	}
	if err := h.call(ctx, "POST", "/v1/login", map[string]string{"username": a.user, "password": a.password}, &out); err != nil {
		return nil, fmt.Errorf("logging in as %s: %w", a.user, err)
	}
	h.token = out.Token
	return h, nil
}

// call sends body as JSON and decodes the answer into out; an error
// answer becomes an error with its code and message.
func (h *httpAPI) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, h.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	resp, err := h.c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(raw, &e) == nil && e.Error.Code != "" {
			return fmt.Errorf("%s: %s", e.Error.Code, e.Error.Message)
		}
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(raw))
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// withUserAPI runs f with a logged-in HTTP API.
func withUserAPI(cmd *cobra.Command, f func(ctx context.Context, a *app, h *httpAPI) error) error {
	a := appFrom(cmd)
	ctx, cancel := context.WithTimeout(cmd.Context(), a.timeout)
	defer cancel()
	h, err := userAPI(ctx, cmd, a)
	if err != nil {
		return err
	}
	return f(ctx, a, h)
}

// newPassword is --new-password, else one line of stdin (so that it
// need not appear in the process list or the shell's history).
func newPassword(a *app, flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	line, err := bufio.NewReader(a.stdin).ReadString('\n')
	if err != nil && line == "" {
		return "", usageErrorf("give the new password with --new-password or on one line of stdin")
	}
	return strings.TrimRight(line, "\r\n"), nil
}

func (a *app) printUser(u userJSON) error {
	return a.emit(u, func(w io.Writer) {
		role := "user"
		if u.Superuser {
			role = "superuser"
		}
		fmt.Fprintf(w, "%s (%s)\n", u.Name, role)
		for _, r := range u.Rules {
			fmt.Fprintf(w, "  %s\n", r)
		}
	})
}

func newUserCreateCmd() *cobra.Command {
	var superuser bool
	var pw string
	cmd := &cobra.Command{
		Use:   "create NAME [--superuser] [--new-password P]",
		Short: "create a user (the password from --new-password or one line of stdin)",
		Args:  argsRange(1, 1, "one user NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withUserAPI(cmd, func(ctx context.Context, a *app, h *httpAPI) error {
				p, err := newPassword(a, pw)
				if err != nil {
					return err
				}
				var u userJSON
				if err := h.call(ctx, "POST", "/v1/users", map[string]any{"name": args[0], "password": p, "superuser": superuser}, &u); err != nil {
					return err
				}
				return a.printUser(u)
			})
		},
	}
	cmd.Flags().BoolVar(&superuser, "superuser", false, "an administrator: may do everything")
	cmd.Flags().StringVar(&pw, "new-password", "", "the user's password (default: one line of stdin)")
	return cmd
}

func newUserListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "list users and their permissions",
		Args:  argsRange(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withUserAPI(cmd, func(ctx context.Context, a *app, h *httpAPI) error {
				var out struct {
					Users []userJSON `json:"users"`
				}
				if err := h.call(ctx, "GET", "/v1/users", nil, &out); err != nil {
					return err
				}
				return a.emit(out.Users, func(w io.Writer) {
					for _, u := range out.Users {
						a.printUser(u)
					}
				})
			})
		},
	}
}

func newUserDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "delete a user (its connections lose every permission at once, its tokens stop working)",
		Args:  argsRange(1, 1, "one user NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withUserAPI(cmd, func(ctx context.Context, a *app, h *httpAPI) error {
				var u userJSON
				if err := h.call(ctx, "DELETE", "/v1/users/"+url.PathEscape(args[0]), nil, &u); err != nil {
					return err
				}
				return a.emit(u, func(w io.Writer) { fmt.Fprintf(w, "deleted user %s\n", u.Name) })
			})
		},
	}
}

func newUserPasswdCmd() *cobra.Command {
	var pw string
	cmd := &cobra.Command{
		Use:   "passwd NAME [--new-password P]",
		Short: "set a user's password (a user may set their own; the tokens issued before stop working)",
		Args:  argsRange(1, 1, "one user NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withUserAPI(cmd, func(ctx context.Context, a *app, h *httpAPI) error {
				p, err := newPassword(a, pw)
				if err != nil {
					return err
				}
				var u userJSON
				if err := h.call(ctx, "PUT", "/v1/users/"+url.PathEscape(args[0])+"/password", map[string]string{"password": p}, &u); err != nil {
					return err
				}
				return a.emit(u, func(w io.Writer) { fmt.Fprintf(w, "password of %s set\n", u.Name) })
			})
		},
	}
	cmd.Flags().StringVar(&pw, "new-password", "", "the new password (default: one line of stdin)")
	return cmd
}

func newUserRuleCmd(verb, short string) *cobra.Command {
	var topic, prefix, group, groupPrefix string
	var deny, allTopics, allGroups bool
	cmd := &cobra.Command{
		Use:   verb + " NAME OP [--topic T | --prefix P | --all-topics | --group G | --group-prefix P | --all-groups] [--deny]",
		Short: short + ": OP is read, write, create, delete, describe or cluster (for groups: read, describe or delete)",
		Args:  argsRange(2, 2, "a user NAME and an OP"),
		RunE: func(cmd *cobra.Command, args []string) error {
			r := ruleJSON{Allow: !deny, Op: args[1]}
			set := 0
			for _, on := range []bool{topic != "", prefix != "", allTopics, group != "", groupPrefix != "", allGroups} {
				if on {
					set++
				}
			}
			switch {
			case r.Op == "cluster":
			case set != 1:
				return usageErrorf("%s %s needs one of --topic, --prefix, --all-topics, --group, --group-prefix or --all-groups", verb, r.Op)
			case topic != "":
				r.Topic = topic
			case prefix != "":
				r.Topic, r.Prefix = prefix, true
			case allTopics:
				r.Prefix = true
			case group != "":
				r.Topic, r.Group = group, true
			case groupPrefix != "":
				r.Topic, r.Prefix, r.Group = groupPrefix, true, true
			case allGroups:
				r.Prefix, r.Group = true, true
			}
			return withUserAPI(cmd, func(ctx context.Context, a *app, h *httpAPI) error {
				var u userJSON
				if err := h.call(ctx, "POST", "/v1/users/"+url.PathEscape(args[0])+"/"+verb, map[string]any{"rules": []ruleJSON{r}}, &u); err != nil {
					return err
				}
				return a.printUser(u)
			})
		},
	}
	cmd.Flags().StringVar(&topic, "topic", "", "the topic the rule is about")
	cmd.Flags().StringVar(&prefix, "prefix", "", "every topic whose name starts with this")
	cmd.Flags().BoolVar(&allTopics, "all-topics", false, "every topic")
	cmd.Flags().StringVar(&group, "group", "", "the consumer group the rule is about")
	cmd.Flags().StringVar(&groupPrefix, "group-prefix", "", "every consumer group whose name starts with this")
	cmd.Flags().BoolVar(&allGroups, "all-groups", false, "every consumer group")
	cmd.Flags().BoolVar(&deny, "deny", false, "a deny rule (deny wins over any allow)")
	return cmd
}
