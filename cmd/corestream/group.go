package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/corestream/corestream/client"
)

// Consumer groups are served over the Kafka protocol (docs/kafka.md):
// the group commands find the nodes' Kafka listeners through the native
// protocol (ClusterStatus) and ask them as any Kafka admin tool does.

func init() { commands = append(commands, newGroupCmd) }

func newGroupCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "group", Short: "list and describe consumer groups", RunE: groupRun}
	cmd.AddCommand(newGroupListCmd(), newGroupDescribeCmd())
	return cmd
}

// errNoKafka says why a group command cannot run.
var errNoKafka = errors.New("no live node has a Kafka listener (node.kafka_addr): consumer groups are served over the Kafka protocol")

// withGroupAdmin runs f with a Kafka admin client of the cluster's live
// Kafka listeners.
func withGroupAdmin(cmd *cobra.Command, f func(ctx context.Context, a *app, adm *kadm.Client) error) error {
	return withClient(cmd, func(ctx context.Context, a *app, c *client.Client) error {
		st, err := c.ClusterStatus(ctx)
		if err != nil {
			return err
		}
		var addrs []string
		for _, n := range st.Nodes {
			if n.Alive && n.KafkaAddr != "" {
				addrs = append(addrs, n.KafkaAddr)
			}
		}
		if len(addrs) == 0 {
			return errNoKafka
		}
		kc, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ClientID("corestream-cli"))
		if err != nil {
			return err
		}
		defer kc.Close()
		return f(ctx, a, kadm.NewClient(kc))
	})
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
			return withGroupAdmin(cmd, func(ctx context.Context, a *app, adm *kadm.Client) error {
				ls, err := adm.ListGroups(ctx)
				if err != nil {
					return fmt.Errorf("listing groups: %w", err)
				}
				out := []groupJSON{}
				for _, g := range ls.Sorted() {
					out = append(out, groupJSON{Name: g.Group, State: g.State, ProtocolType: g.ProtocolType, Coordinator: g.Coordinator})
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
	// Lag is End - Committed (End when nothing is committed), -1 when
	// either could not be read.
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

func newGroupDescribeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "describe GROUP",
		Short: "a group's members, assignment, committed offsets, end offsets and lag",
		Args:  argsRange(1, 1, "one GROUP"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withGroupAdmin(cmd, func(ctx context.Context, a *app, adm *kadm.Client) error {
				lags, err := adm.Lag(ctx, args[0])
				if err != nil {
					return fmt.Errorf("describing group %q: %w", args[0], err)
				}
				l, ok := lags[args[0]]
				if !ok {
					return fmt.Errorf("describing group %q: no answer", args[0])
				}
				if err := l.Error(); err != nil {
					return fmt.Errorf("describing group %q: %w", args[0], err)
				}
				out := groupDescJSON{Name: l.Group, State: l.State, Protocol: l.Protocol, Members: []groupMemberJSON{}, Partitions: []groupPartitionJSON{}}
				for _, m := range l.Members {
					out.Members = append(out.Members, groupMemberJSON{ID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost})
				}
				for _, ps := range l.Lag {
					for _, p := range ps {
						gp := groupPartitionJSON{Topic: p.Topic, Partition: p.Partition, Committed: p.Commit.At, End: p.End.Offset, Lag: p.Lag}
						if p.Member != nil {
							gp.Member = p.Member.MemberID
						}
						if p.Lag > 0 {
							out.TotalLag += p.Lag
						}
						out.Partitions = append(out.Partitions, gp)
					}
				}
				sort.Slice(out.Partitions, func(i, j int) bool {
					pi, pj := out.Partitions[i], out.Partitions[j]
					return pi.Topic < pj.Topic || pi.Topic == pj.Topic && pi.Partition < pj.Partition
				})
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
