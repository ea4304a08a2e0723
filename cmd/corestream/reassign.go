package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/netio/wire"
)

// reassignPollEvery is how often --wait lists the moves.
const reassignPollEvery = 500 * time.Millisecond

// reassignPlan is a plan file: the new replica list of each partition,
// preferred primary first.
type reassignPlan struct {
	Version    int                  `json:"version"`
	Partitions []reassignPlanChange `json:"partitions"`
}

type reassignPlanChange struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
}

// reassignMoveJSON is one move in the commands' --json output.
type reassignMoveJSON struct {
	Topic         string   `json:"topic"`
	Partition     int32    `json:"partition"`
	From          []int32  `json:"from"`
	Target        []int32  `json:"target"`
	Cancelled     bool     `json:"cancelled"`
	Driven        bool     `json:"driven"`
	EntriesBehind int64    `json:"entries_behind"`
	BytesBehind   int64    `json:"bytes_behind"`
	Steps         []string `json:"steps"`
}

// parseNodeIDs reads "1,4,5".
func parseNodeIDs(s string) ([]int32, error) {
	var out []int32
	for _, f := range strings.Split(s, ",") {
		id, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil || id < 1 {
			return nil, usageErrorf("--replicas %q: %q is not a node id (1, 2, ...)", s, f)
		}
		out = append(out, int32(id))
	}
	return out, nil
}

// readPlan reads and checks a plan file's shape (the metadata primary
// checks the rest).
func readPlan(path string) ([]wire.ReassignMove, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usageErrorf("--plan: %v", err)
	}
	var plan reassignPlan
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&plan); err != nil {
		return nil, usageErrorf("--plan %s: not a plan (%v); expected {\"version\": 1, \"partitions\": [{\"topic\": \"orders\", \"partition\": 0, \"replicas\": [2, 3, 4]}]}", path, err)
	}
	if plan.Version != 1 {
		return nil, usageErrorf("--plan %s: version %d, this tool reads version 1", path, plan.Version)
	}
	if len(plan.Partitions) == 0 || len(plan.Partitions) > wire.ReassignMovesMax {
		return nil, usageErrorf("--plan %s: %d partitions, a plan holds 1..%d", path, len(plan.Partitions), wire.ReassignMovesMax)
	}
	var out []wire.ReassignMove
	for _, p := range plan.Partitions {
		out = append(out, wire.ReassignMove{Topic: p.Topic, Partition: p.Partition, Replicas: p.Replicas})
	}
	return out, nil
}

func movesJSON(ms []wire.ReassignStatus) []reassignMoveJSON {
	out := []reassignMoveJSON{}
	for _, m := range ms {
		out = append(out, reassignMoveJSON{m.Topic, m.Partition, m.From, m.Target, m.Cancelled, m.Driven, m.EntriesBehind, m.BytesBehind, m.Steps})
	}
	return out
}

func printMoves(w io.Writer, ms []reassignMoveJSON) {
	tw := table(w)
	fmt.Fprintln(tw, "PARTITION\tFROM\tTO\tSTATE\tENTRIES BEHIND\tBYTES BEHIND\tSTEPS")
	for _, m := range ms {
		state := "waiting"
		if m.Driven {
			state = "moving"
		}
		if m.Cancelled {
			state += " (cancelled: back to FROM)"
		}
		fmt.Fprintf(tw, "%s/%d\t%s\t%s\t%s\t%d\t%d\t%s\n", m.Topic, m.Partition, ids(m.From), ids(m.Target), state,
			m.EntriesBehind, m.BytesBehind, strings.Join(m.Steps, ", "))
	}
	tw.Flush()
}

// runReassign sends req and, with wait, follows the moves it names until
// none is in progress.
func runReassign(cmd *cobra.Command, req *wire.ReassignRequest, wait bool) error {
	return withClient(cmd, func(ctx context.Context, a *app, c *client.Client) error {
		resp, err := c.Reassign(ctx, req)
		if err != nil {
			return err
		}
		out := movesJSON(resp.Moves)
		verb := map[uint8]string{wire.ReassignStart: "started", wire.ReassignCancel: "cancelled", wire.ReassignList: "in progress"}[req.Action]
		if req.DryRun {
			verb = "checked, not started (dry run)"
		}
		if err := a.emit(struct {
			Action string             `json:"action"`
			Moves  []reassignMoveJSON `json:"moves"`
		}{verb, out}, func(w io.Writer) {
			fmt.Fprintf(w, "%d moves %s\n", len(out), verb)
			if len(out) > 0 {
				printMoves(w, out)
			}
		}); err != nil {
			return err
		}
		if !wait || req.DryRun || req.Action == wire.ReassignList {
			return nil
		}
		return followMoves(cmd.Context(), a, c, req.Moves)
	})
}

// followMoves prints the progress of the named moves until none is in
// progress (each list bounded by --timeout; the whole by the command's
// context: interrupt to stop following, the moves go on).
func followMoves(ctx context.Context, a *app, c *client.Client, named []wire.ReassignMove) error {
	want := map[string]bool{}
	for _, m := range named {
		want[fmt.Sprintf("%s/%d", m.Topic, m.Partition)] = true
	}
	start := time.Now()
	for {
		lctx, cancel := context.WithTimeout(ctx, a.timeout)
		resp, err := c.Reassign(lctx, &wire.ReassignRequest{Action: wire.ReassignList})
		cancel()
		if err != nil {
			return fmt.Errorf("following the moves: %w", err)
		}
		var left []reassignMoveJSON
		var bytes int64
		for _, m := range movesJSON(resp.Moves) {
			if want[fmt.Sprintf("%s/%d", m.Topic, m.Partition)] {
				left = append(left, m)
				bytes += m.BytesBehind
			}
		}
		if !a.json {
			fmt.Fprintf(a.stdout, "%v: %d of %d moves left, %d bytes behind\n", time.Since(start).Round(100*time.Millisecond), len(left), len(want), bytes)
		}
		if len(left) == 0 {
			return a.emit(struct {
				Done     bool    `json:"done"`
				Duration float64 `json:"duration_seconds"`
			}{true, time.Since(start).Seconds()}, func(w io.Writer) { fmt.Fprintln(w, "every move finished") })
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(reassignPollEvery):
		}
	}
}

func newPartitionReassignCmd() *cobra.Command {
	var replicas string
	var dryRun, cancel, wait bool
	cmd := &cobra.Command{
		Use:   "reassign TOPIC P --replicas 1,4,5 [--dry-run] [--wait] | --cancel",
		Short: "move a partition's replicas to other nodes (the factor stays; the first is the preferred primary)",
		Args:  argsRange(2, 2, "a TOPIC and a partition P"),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := parsePartition(args[1])
			if err != nil {
				return err
			}
			req := &wire.ReassignRequest{Action: wire.ReassignStart, DryRun: dryRun, Moves: []wire.ReassignMove{{Topic: args[0], Partition: p}}}
			switch {
			case cancel && replicas != "":
				return usageErrorf("--cancel takes no --replicas")
			case cancel:
				req.Action = wire.ReassignCancel
			case replicas == "":
				return usageErrorf("--replicas is required (the new list, as 1,4,5), or --cancel")
			default:
				if req.Moves[0].Replicas, err = parseNodeIDs(replicas); err != nil {
					return err
				}
			}
			return runReassign(cmd, req, wait)
		},
	}
	cmd.Flags().StringVar(&replicas, "replicas", "", "the new replica list, preferred primary first, as 1,4,5")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "check the move, start nothing")
	cmd.Flags().BoolVar(&cancel, "cancel", false, "turn the partition's move back to the replicas it started from")
	cmd.Flags().BoolVar(&wait, "wait", false, "follow the move's progress until it finishes")
	return cmd
}

func newClusterReassignCmd() *cobra.Command {
	var plan string
	var dryRun, cancel, wait bool
	cmd := &cobra.Command{
		Use:   "reassign [--plan FILE [--dry-run] [--wait] [--cancel]]",
		Short: "move replicas of many partitions by a plan file, or list the moves in progress",
		Args:  argsRange(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if plan == "" {
				if dryRun || cancel || wait {
					return usageErrorf("--dry-run, --cancel and --wait need a --plan")
				}
				return runReassign(cmd, &wire.ReassignRequest{Action: wire.ReassignList}, false)
			}
			moves, err := readPlan(plan)
			if err != nil {
				return err
			}
			req := &wire.ReassignRequest{Action: wire.ReassignStart, DryRun: dryRun, Moves: moves}
			if cancel {
				req.Action = wire.ReassignCancel
			}
			return runReassign(cmd, req, wait)
		},
	}
	cmd.Flags().StringVar(&plan, "plan", "", `a plan file: {"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [2, 3, 4]}]}`)
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "check the whole plan, start nothing")
	cmd.Flags().BoolVar(&cancel, "cancel", false, "turn the plan's moves back to the replicas they started from")
	cmd.Flags().BoolVar(&wait, "wait", false, "follow the moves' progress until they finish")
	return cmd
}
