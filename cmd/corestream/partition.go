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

func init() { commands = append(commands, newPartitionCmd) }

func newPartitionCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "partition", Short: "describe partitions, move their primaries and their replicas", RunE: groupRun}
	cmd.AddCommand(newPartitionDescribeCmd(), newPartitionMovePrimaryCmd(), newPartitionReassignCmd())
	return cmd
}

// parsePartition reads a partition argument.
func parsePartition(s string) (int32, error) {
	p, err := strconv.ParseInt(s, 10, 32)
	if err != nil || p < 0 {
		return 0, usageErrorf("partition %q is not a partition index (0, 1, ...)", s)
	}
	return int32(p), nil
}

// replicaJSON is one replica's progress.
type replicaJSON struct {
	Node         int32  `json:"node"`
	LogEndOffset int64  `json:"log_end_offset"`
	InSync       bool   `json:"in_sync"`
	LastCaughtUp string `json:"last_caught_up,omitempty"`
}

// partitionJSON is one partition in `partition describe --json`.
type partitionJSON struct {
	Topic          string        `json:"topic"`
	Route          routeJSON     `json:"route"`
	LogStartOffset int64         `json:"log_start_offset"`
	HighWatermark  int64         `json:"high_watermark"`
	LogEndOffset   int64         `json:"log_end_offset"`
	SizeBytes      int64         `json:"size_bytes"`
	Segments       int32         `json:"segments"`
	Replicas       []replicaJSON `json:"replicas"`
}

func newPartitionDescribeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "describe TOPIC [P]",
		Short: "show partitions' primary, generation, offsets and replica progress",
		Args:  argsRange(1, 2, "a TOPIC and optionally a partition P"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var only int32 = -1
			if len(args) == 2 {
				p, err := parsePartition(args[1])
				if err != nil {
					return err
				}
				only = p
			}
			return withClient(cmd, func(ctx context.Context, a *app, c *client.Client) error {
				parts := []int32{only}
				if only < 0 {
					n, err := c.Partitions(ctx, args[0])
					if err != nil {
						return err
					}
					parts = parts[:0]
					for i := int32(0); i < n; i++ {
						parts = append(parts, i)
					}
				}
				out := []partitionJSON{}
				var descs []*wire.DescribePartitionResponse
				for _, p := range parts {
					d, err := c.DescribePartition(ctx, args[0], p)
					if err != nil {
						return &client.PartitionError{Topic: args[0], Partition: p, Err: err}
					}
					pj := partitionJSON{Topic: args[0], Route: routeOut(d.Route), LogStartOffset: d.LogStartOffset,
						HighWatermark: d.HighWatermark, LogEndOffset: d.LogEndOffset, SizeBytes: d.SizeBytes, Segments: d.Segments, Replicas: []replicaJSON{}}
					for _, r := range d.Replicas {
						rj := replicaJSON{Node: r.NodeID, LogEndOffset: r.LogEndOffset, InSync: r.InSync}
						if r.LastCaughtUpMs >= 0 {
							rj.LastCaughtUp = time.UnixMilli(r.LastCaughtUpMs).UTC().Format(time.RFC3339Nano)
						}
						pj.Replicas = append(pj.Replicas, rj)
					}
					out = append(out, pj)
					descs = append(descs, d)
				}
				return a.emit(out, func(w io.Writer) {
					tw := table(w)
					fmt.Fprintln(tw, "PARTITION\tPRIMARY\tGENERATION\tLOG-START\tHIGH-WATERMARK\tLOG-END\tBYTES\tSEGMENTS\tREPLICAS (node:log-end:in-sync:caught-up-ago)")
					for i, p := range out {
						reps := ""
						for j, r := range p.Replicas {
							if j > 0 {
								reps += " "
							}
							reps += fmt.Sprintf("%d:%d:%s:%s", r.Node, r.LogEndOffset, yesNo(r.InSync), caughtUpAgo(descs[i], r.Node))
						}
						fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\n", p.Route.Partition, p.Route.Primary, p.Route.Generation,
							p.LogStartOffset, p.HighWatermark, p.LogEndOffset, p.SizeBytes, p.Segments, orDash(reps))
					}
					tw.Flush()
				})
			})
		},
	}
}

func newPartitionMovePrimaryCmd() *cobra.Command {
	var to int32
	cmd := &cobra.Command{
		Use:   "move-primary TOPIC P --to NODE",
		Short: "move a partition's primary to another in-sync replica and wait for it",
		Args:  argsRange(2, 2, "a TOPIC and a partition P"),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := parsePartition(args[1])
			if err != nil {
				return err
			}
			return withClient(cmd, func(ctx context.Context, a *app, c *client.Client) error {
				resp, err := c.MovePrimary(ctx, args[0], p, to)
				if err != nil {
					return err
				}
				out := struct {
					Topic      string `json:"topic"`
					Partition  int32  `json:"partition"`
					Primary    int32  `json:"primary"`
					Generation int32  `json:"generation"`
				}{args[0], p, resp.PrimaryID, resp.Generation}
				return a.emit(out, func(w io.Writer) {
					fmt.Fprintf(w, "%s/%d: primary is node %d (generation %d)\n", out.Topic, out.Partition, out.Primary, out.Generation)
				})
			})
		},
	}
	cmd.Flags().Int32Var(&to, "to", 0, "the node to make primary (one of the partition's replicas)")
	cmd.MarkFlagRequired("to")
	return cmd
}

// caughtUpAgo is how long before the primary answered replica node last
// caught up to its log end ("-": never seen to). Both times are the
// primary's clock (its own entry is the time it answered), so no clock
// skew enters.
func caughtUpAgo(d *wire.DescribePartitionResponse, node int32) string {
	var at, now int64 = -1, -1
	for _, r := range d.Replicas {
		if r.NodeID == node {
			at = r.LastCaughtUpMs
		}
		if r.NodeID == d.Route.PrimaryID {
			now = r.LastCaughtUpMs
		}
	}
	if at < 0 || now < 0 {
		return "-"
	}
	return (time.Duration(max(0, now-at)) * time.Millisecond).Round(100 * time.Millisecond).String()
}
