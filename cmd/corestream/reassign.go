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
	// BytesMoved is how far the new replicas' lag shrank; EtaMs the time
	// left at the recent catch-up rate (-1: unknown yet).
	BytesMoved int64 `json:"bytes_moved"`
	EtaMs      int64 `json:"eta_ms"`
}

// parseRate reads a --throttle value: bytes per second, with an optional
// K, M or G suffix (powers of 1024), "0" for none.
func parseRate(s string) (int64, error) {
	mult := int64(1)
	t := strings.TrimSuffix(strings.TrimSpace(s), "/s")
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "i")
	switch {
	case strings.HasSuffix(t, "K"):
		mult, t = 1<<10, strings.TrimSuffix(t, "K")
	case strings.HasSuffix(t, "M"):
		mult, t = 1<<20, strings.TrimSuffix(t, "M")
	case strings.HasSuffix(t, "G"):
		mult, t = 1<<30, strings.TrimSuffix(t, "G")
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v < 0 || v > (1<<62)/mult {
		return 0, usageErrorf("--throttle %q: give bytes per second, as 1048576, 512K or 20M (0: none)", s)
	}
	return v * mult, nil
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
		out = append(out, reassignMoveJSON{m.Topic, m.Partition, m.From, m.Target, m.Cancelled, m.Driven, m.EntriesBehind, m.BytesBehind, m.Steps,
			m.BytesMoved, m.EtaMs})
	}
	return out
}

func printMoves(w io.Writer, ms []reassignMoveJSON) {
	tw := table(w)
	fmt.Fprintln(tw, "PARTITION\tFROM\tTO\tSTATE\tENTRIES BEHIND\tBYTES BEHIND\tMOVED\tETA\tSTEPS")
	for _, m := range ms {
		state := "waiting"
		if m.Driven {
			state = "moving"
		}
		if m.Cancelled {
			state += " (cancelled: back to FROM)"
		}
		fmt.Fprintf(tw, "%s/%d\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", m.Topic, m.Partition, ids(m.From), ids(m.Target), state,
			m.EntriesBehind, m.BytesBehind, humanBytes(m.BytesMoved), eta(m.EtaMs), strings.Join(m.Steps, ", "))
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
		drains := drainsJSON(resp.Drains)
		if err := a.emit(struct {
			Action string             `json:"action"`
			Moves  []reassignMoveJSON `json:"moves"`
			Drains []drainJSON        `json:"drains"`
		}{verb, out, drains}, func(w io.Writer) {
			fmt.Fprintf(w, "%d moves %s\n", len(out), verb)
			if len(out) > 0 {
				printMoves(w, out)
			}
			if len(drains) > 0 {
				printDrains(w, drains)
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
		for _, m := range movesJSON(resp.Moves) {
			if want[fmt.Sprintf("%s/%d", m.Topic, m.Partition)] {
				left = append(left, m)
			}
		}
		if !a.json {
			fmt.Fprintln(a.stdout, progressLine(time.Since(start), len(want)-len(left), len(want), left))
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

// progressLine is one line of --wait: a bar of the moves finished, the
// bytes behind and moved, and the ETA of the moves under way (their bytes
// behind at their recent rates; unknown until each has two answers).
func progressLine(elapsed time.Duration, done, total int, left []reassignMoveJSON) string {
	const width = 20
	filled := 0
	if total > 0 {
		filled = done * width / total
	}
	return fmt.Sprintf("%v [%s%s] %d/%d moves done, %s", elapsed.Round(100*time.Millisecond),
		strings.Repeat("#", filled), strings.Repeat(".", width-filled), done, total, movesProgress(left))
}

// movesProgress sums the bytes behind and moved of moves and their ETA.
func movesProgress(left []reassignMoveJSON) string {
	var behind, moved int64
	var rate float64 // bytes/s of the moves under way
	known := true
	for _, m := range left {
		behind += m.BytesBehind
		moved += m.BytesMoved
		switch {
		case m.BytesBehind == 0:
		case m.EtaMs > 0:
			rate += float64(m.BytesBehind) / (float64(m.EtaMs) / 1000)
		default:
			known = false
		}
	}
	etaText := "-"
	switch {
	case behind == 0 && len(left) > 0:
		etaText = "waiting for a step"
	case behind == 0:
		etaText = "0s"
	case known && rate > 0:
		etaText = eta(int64(float64(behind) / rate * 1000))
	}
	return fmt.Sprintf("%s behind, %s moved, ETA %s", humanBytes(behind), humanBytes(moved), etaText)
}

// eta renders a time left in ms (-1: unknown).
func eta(ms int64) string {
	if ms < 0 {
		return "-"
	}
	return (time.Duration(ms) * time.Millisecond).Round(100 * time.Millisecond).String()
}

// humanBytes renders n bytes in KiB, MiB or GiB.
func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func newPartitionReassignCmd() *cobra.Command {
	var replicas, throttle string
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
			if req.ThrottleBytesPerSecond, err = parseRate(throttle); err != nil {
				return err
			}
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
	cmd.Flags().StringVar(&throttle, "throttle", "0", "catch-up bytes/s each node sends the new replica, as 20M (0: the nodes' cluster.reassign_throttle_bytes_per_second)")
	return cmd
}

func newClusterReassignCmd() *cobra.Command {
	var plan, throttle string
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
			if req.ThrottleBytesPerSecond, err = parseRate(throttle); err != nil {
				return err
			}
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
	cmd.Flags().StringVar(&throttle, "throttle", "0", "catch-up bytes/s each node sends the new replicas, as 20M (0: the nodes' cluster.reassign_throttle_bytes_per_second)")
	return cmd
}
