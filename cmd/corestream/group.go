package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/spf13/cobra"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/netio/wire"
)

// Consumer groups over the native protocol (docs/protocol.md, "Consumer
// groups"): the same groups Kafka clients and the Go SDK's group
// consumers form, with or without a Kafka listener.

func init() { commands = append(commands, newGroupCmd) }

func newGroupCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "group", Short: "list, describe, delete consumer groups and reset their offsets", RunE: groupRun}
	cmd.AddCommand(newGroupListCmd(), newGroupDescribeCmd(), newGroupDeleteCmd(), newGroupResetCmd())
	return cmd
}

// groupJSON is a group in --json output of group list.
type groupJSON struct {
	Name         string `json:"name"`
	State        string `json:"state"`
	ProtocolType string `json:"protocol_type"`
	Coordinator  int32  `json:"coordinator"`
}

func newGroupListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "list the consumer groups the coordinators hold",
		Args:  argsRange(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, func(ctx context.Context, a *app, c *client.Client) error {
				ls, err := c.ListGroups(ctx)
				if err != nil && len(ls) == 0 {
					return fmt.Errorf("listing groups: %w", err)
				}
				if err != nil {
					fmt.Fprintf(a.stderr, "warning: %v\n", err)
				}
				out := []groupJSON{}
				for _, g := range ls {
					gj := groupJSON{Name: g.Name, State: g.State, ProtocolType: g.ProtocolType, Coordinator: -1}
					if co, err := c.FindCoordinator(ctx, g.Name); err == nil {
						gj.Coordinator = co.NodeID
					}
					out = append(out, gj)
				}
				return a.emit(out, func(w io.Writer) {
					tw := table(w)
					fmt.Fprintln(tw, "GROUP\tSTATE\tPROTOCOL TYPE\tCOORDINATOR")
					for _, g := range out {
						fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", g.Name, g.State, g.ProtocolType, g.Coordinator)
					}
					tw.Flush()
				})
			})
		},
	}
}

// groupMemberJSON is a member in group describe --json.
type groupMemberJSON struct {
	ID       string `json:"id"`
	ClientID string `json:"client_id"`
	Host     string `json:"host"`
}

// groupPartitionJSON is one partition's progress in group describe.
type groupPartitionJSON struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Member is the member assigned it ("" when none).
	Member string `json:"member"`
	// Committed is the committed offset, -1 when none.
	Committed int64 `json:"committed"`
	End       int64 `json:"end"`
	// Lag is End - Committed, 0 when the commit is at or past the end,
	// and -1 when nothing is committed or the end could not be read (as
	// kafka-consumer-groups shows "-"): the lag of the console and of
	// /metrics, which count committed partitions only.
	Lag int64 `json:"lag"`
}

// groupDescJSON is group describe --json.
type groupDescJSON struct {
	Name       string               `json:"name"`
	State      string               `json:"state"`
	Protocol   string               `json:"protocol"`
	Members    []groupMemberJSON    `json:"members"`
	Partitions []groupPartitionJSON `json:"partitions"`
	TotalLag   int64                `json:"total_lag"`
}

// describeGroup gathers a group's state, members, assignment, committed
// and end offsets. A group its coordinator does not hold but that has
// committed offsets (after a restart) is Empty, as Kafka shows it.
func describeGroup(ctx context.Context, c *client.Client, group string) (groupDescJSON, error) {
	out := groupDescJSON{Name: group, Members: []groupMemberJSON{}, Partitions: []groupPartitionJSON{}}
	d, err := c.DescribeGroup(ctx, group)
	switch {
	case errors.Is(err, wire.ErrUnknownGroup):
		out.State = "Empty"
	case err != nil:
		return out, fmt.Errorf("describing group %q: %w", group, err)
	default:
		out.State, out.Protocol = d.State, d.Protocol
	}
	offs, err := c.FetchGroupOffsets(ctx, group, nil)
	if err != nil {
		return out, fmt.Errorf("reading group %q's offsets: %w", group, err)
	}
	if d == nil && len(offs) == 0 {
		return out, fmt.Errorf("group %q does not exist: no members and no committed offsets", group)
	}
	byPart := map[wire.TopicPartition]*groupPartitionJSON{}
	part := func(tp wire.TopicPartition) *groupPartitionJSON {
		if p := byPart[tp]; p != nil {
			return p
		}
		p := &groupPartitionJSON{Topic: tp.Topic, Partition: tp.Partition, Committed: -1}
		byPart[tp] = p
		return p
	}
	if d != nil {
		for _, m := range d.Members {
			out.Members = append(out.Members, groupMemberJSON{ID: m.MemberID, ClientID: m.ClientID, Host: m.Host})
			parts, _ := client.GroupAssignment(m.Assignment) // not a consumer's: no partitions shown
			for _, tp := range parts {
				part(tp).Member = m.MemberID
			}
		}
	}
	for _, o := range offs {
		part(wire.TopicPartition{Topic: o.Topic, Partition: o.Partition}).Committed = o.Offset
	}
	for _, p := range byPart {
		p.End, p.Lag = -1, -1
		if lo, err := c.ListOffsets(ctx, p.Topic, p.Partition, wire.TimestampLatest); err == nil {
			p.End = lo.Offset
			if p.Committed >= 0 {
				p.Lag = max(p.End-p.Committed, 0)
				out.TotalLag += p.Lag
			}
		}
		out.Partitions = append(out.Partitions, *p)
	}
	sort.Slice(out.Partitions, func(i, j int) bool {
		pi, pj := out.Partitions[i], out.Partitions[j]
		return pi.Topic < pj.Topic || pi.Topic == pj.Topic && pi.Partition < pj.Partition
	})
	return out, nil
}

func newGroupDescribeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "describe GROUP",
		Short: "a group's members, assignment, committed offsets, end offsets and lag",
		Args:  argsRange(1, 1, "one GROUP"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, func(ctx context.Context, a *app, c *client.Client) error {
				out, err := describeGroup(ctx, c, args[0])
				if err != nil {
					return err
				}
				return a.emit(out, func(w io.Writer) {
					fmt.Fprintf(w, "group %s: %s, protocol %q, %d members, total lag %d\n", out.Name, out.State, out.Protocol, len(out.Members), out.TotalLag)
					tw := table(w)
					fmt.Fprintln(tw, "TOPIC\tPARTITION\tMEMBER\tCOMMITTED\tEND\tLAG")
					for _, p := range out.Partitions {
						fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\n", p.Topic, p.Partition, p.Member, p.Committed, p.End, p.Lag)
					}
					tw.Flush()
				})
			})
		},
	}
}

func newGroupDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "delete GROUP",
		Short: "delete an empty group and its committed offsets",
		Args:  argsRange(1, 1, "one GROUP"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, func(ctx context.Context, a *app, c *client.Client) error {
				if err := c.DeleteGroup(ctx, args[0]); err != nil {
					if errors.Is(err, wire.ErrNonEmptyGroup) {
						return fmt.Errorf("deleting group %q: %w (stop its members, or wait until their sessions end)", args[0], err)
					}
					return fmt.Errorf("deleting group %q: %w", args[0], err)
				}
				return a.emit(map[string]string{"deleted": args[0]}, func(w io.Writer) { fmt.Fprintf(w, "group %s deleted\n", args[0]) })
			})
		},
	}
}
