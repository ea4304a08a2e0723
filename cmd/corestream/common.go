package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/corestream/corestream/client"
)

// dial connects to the cluster named by --brokers within --timeout.
func (a *app) dial(ctx context.Context) (*client.Client, error) {
	var brokers []string
	for _, b := range strings.Split(a.brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			brokers = append(brokers, b)
		}
	}
	if len(brokers) == 0 {
		return nil, usageErrorf("--brokers names no broker")
	}
	tc, err := a.tls.config(a.getenv)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	c, err := client.DialConfig(ctx, client.Config{Brokers: brokers, ClientID: "corestream-cli", RequestTimeout: a.timeout,
		Username: a.user, Password: a.password, TLS: tc})
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", strings.Join(brokers, ","), err)
	}
	return c, nil
}

// withClient runs f with a client and a context bounded by --timeout.
func withClient(cmd *cobra.Command, f func(ctx context.Context, a *app, c *client.Client) error) error {
	a := appFrom(cmd)
	c, err := a.dial(cmd.Context())
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), a.timeout)
	defer cancel()
	return f(ctx, a, c)
}

// emit prints v as indented JSON with --json, else calls human.
func (a *app) emit(v any, human func(w io.Writer)) error {
	if a.json {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	human(a.stdout)
	return nil
}

// table returns a tab-aligned writer; call Flush when done.
func table(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// ids renders node ids as "1,2,3" ("-" when empty).
func ids(v []int32) string {
	if len(v) == 0 {
		return "-"
	}
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

// yesNo renders a bool for tables.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// nonNil returns v, or an empty slice for nil, so JSON shows [] not null.
func nonNil[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}
