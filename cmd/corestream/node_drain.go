package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/netio/wire"
)

func init() { commands = append(commands, newNodeCmd) }

func newNodeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node",
		Short: "drain, undrain or replace a roster node (moves its replicas and primaries off it)",
		RunE:  groupRun,
	}
	cmd.AddCommand(newNodeDrainCmd(), newNodeUndrainCmd(), newNodeReplaceCmd())
	return cmd
}

// drainJSON is one draining node in --json output.
type drainJSON struct {
	Node        int32 `json:"node"`
	Replacement int32 `json:"replacement"`
	Replicas    int32 `json:"replicas"`
	Primaries   int32 `json:"primaries"`
	Moving      int32 `json:"moving"`
	Done        bool  `json:"done"`
}

func drainsJSON(ds []wire.DrainStatus) []drainJSON {
	out := []drainJSON{}
	for _, d := range ds {
		out = append(out, drainJSON{d.Node, d.Replacement, d.Replicas, d.Primaries, d.Moving, d.Done})
	}
	return out
}

func printDrains(w io.Writer, ds []drainJSON) {
	tw := table(w)
	fmt.Fprintln(tw, "DRAINING NODE\tREPLACED BY\tREPLICAS LEFT\tPRIMARIES LEFT\tMOVING\tSTATE")
	for _, d := range ds {
		repl, state := "-", "draining"
		if d.Replacement != 0 {
			repl = strconv.Itoa(int(d.Replacement))
		}
		if d.Done {
			state = "holds nothing"
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%s\n", d.Node, repl, d.Replicas, d.Primaries, d.Moving, state)
	}
	tw.Flush()
}

// runDrain sends a drain, undrain or replace and, with wait, follows the
// node's drain until it holds nothing.
func runDrain(cmd *cobra.Command, req *wire.ReassignRequest, wait bool) error {
	return withClient(cmd, func(ctx context.Context, a *app, c *client.Client) error {
		resp, err := c.Reassign(ctx, req)
		if err != nil {
			return err
		}
		verb := map[uint8]string{wire.ReassignDrain: "draining", wire.ReassignUndrain: "undrained", wire.ReassignReplace: "being replaced"}[req.Action]
		if req.DryRun {
			verb = "checked, not recorded (dry run)"
		}
		ds := drainsJSON(resp.Drains)
		if err := a.emit(struct {
			Node   int32       `json:"node"`
			Action string      `json:"action"`
			Drains []drainJSON `json:"drains"`
		}{req.Node, verb, ds}, func(w io.Writer) {
			fmt.Fprintf(w, "node %d %s\n", req.Node, verb)
			if len(ds) > 0 {
				printDrains(w, ds)
			}
		}); err != nil {
			return err
		}
		if !wait || req.DryRun || req.Action == wire.ReassignUndrain {
			return nil
		}
		return followDrain(cmd.Context(), a, c, req.Node)
	})
}

// followDrain prints node id's drain until it holds nothing (each list
// bounded by --timeout; the whole by the command's context: interrupt to
// stop following, the drain goes on).
func followDrain(ctx context.Context, a *app, c *client.Client, id int32) error {
	start := time.Now()
	for {
		lctx, cancel := context.WithTimeout(ctx, a.timeout)
		resp, err := c.Reassign(lctx, &wire.ReassignRequest{Action: wire.ReassignList})
		cancel()
		if err != nil {
			return fmt.Errorf("following the drain: %w", err)
		}
		var st *wire.DrainStatus
		for i := range resp.Drains {
			if resp.Drains[i].Node == id {
				st = &resp.Drains[i]
			}
		}
		if st == nil {
			return fmt.Errorf("node %d is no longer draining (undrained meanwhile?)", id)
		}
		if !a.json {
			fmt.Fprintf(a.stdout, "%v node %d: %d replicas and %d primaries left, %d moves off it under way; %s\n", time.Since(start).Round(100*time.Millisecond), id,
				st.Replicas, st.Primaries, st.Moving, movesProgress(movesJSON(resp.Moves)))
		}
		if st.Done {
			return a.emit(struct {
				Node     int32   `json:"node"`
				Done     bool    `json:"done"`
				Duration float64 `json:"duration_seconds"`
			}{id, true, time.Since(start).Seconds()}, func(w io.Writer) { fmt.Fprintf(w, "node %d holds nothing\n", id) })
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(reassignPollEvery):
		}
	}
}

func newNodeDrainCmd() *cobra.Command {
	var dryRun, wait bool
	cmd := &cobra.Command{
		Use:   "drain ID [--dry-run] [--wait]",
		Short: "move every replica and primary off a node (primaries first; the node stays in the roster, drained, until undrained)",
		Args:  argsRange(1, 1, "a node ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseNodeID(args[0])
			if err != nil {
				return err
			}
			return runDrain(cmd, &wire.ReassignRequest{Action: wire.ReassignDrain, Node: id, DryRun: dryRun}, wait)
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "check the drain, record nothing")
	cmd.Flags().BoolVar(&wait, "wait", false, "follow the drain until the node holds nothing")
	return cmd
}

func newNodeUndrainCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "undrain ID",
		Short: "lift a node's drain: placement and the balancer use it again (moves already started finish)",
		Args:  argsRange(1, 1, "a node ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseNodeID(args[0])
			if err != nil {
				return err
			}
			return runDrain(cmd, &wire.ReassignRequest{Action: wire.ReassignUndrain, Node: id}, false)
		},
	}
}

func newNodeReplaceCmd() *cobra.Command {
	var dryRun, wait bool
	cmd := &cobra.Command{
		Use:   "replace OLD NEW [--dry-run] [--wait]",
		Short: "move every replica of a node gone for good onto another, which takes its place in each replica list",
		Args:  argsRange(2, 2, "the OLD node ID and the NEW one"),
		RunE: func(cmd *cobra.Command, args []string) error {
			old, err := parseNodeID(args[0])
			if err != nil {
				return err
			}
			repl, err := parseNodeID(args[1])
			if err != nil {
				return err
			}
			return runDrain(cmd, &wire.ReassignRequest{Action: wire.ReassignReplace, Node: old, Replacement: repl, DryRun: dryRun}, wait)
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "check the replacement, record nothing")
	cmd.Flags().BoolVar(&wait, "wait", false, "follow until the old node holds nothing")
	return cmd
}
