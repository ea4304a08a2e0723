package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/netio/wire"
)

func init() { commands = append(commands, newTopicCmd) }

func newTopicCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "topic", Short: "create, list, describe and delete topics", RunE: groupRun}
	cmd.AddCommand(newTopicCreateCmd(), newTopicListCmd(), newTopicDescribeCmd(), newTopicDeleteCmd(), newTopicAddPartitionsCmd())
	return cmd
}

// topicJSON is a topic in --json output.
type topicJSON struct {
	Name              string `json:"name"`
	ID                string `json:"id"`
	Partitions        int32  `json:"partitions"`
	ReplicationFactor int16  `json:"replication_factor"`
}

func newTopicCreateCmd() *cobra.Command {
	var partitions int32
	var rf string
	var configs []string
	var validateOnly bool
	cmd := &cobra.Command{
		Use:   "create NAME --partitions N [--replication-factor N|all] [--config KEY=VALUE]...",
		Short: "create a topic",
		Args:  argsRange(1, 1, "one topic NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfgs, err := parseTopicConfigs(configs)
			if err != nil {
				return err
			}
			spec := client.TopicSpec{Name: args[0], Partitions: partitions, ValidateOnly: validateOnly, Configs: cfgs}
			return withClient(cmd, func(ctx context.Context, a *app, c *client.Client) error {
				switch rf {
				case "", "default":
				case "all":
					md, err := c.Metadata(ctx)
					if err != nil {
						return err
					}
					spec.ReplicationFactor = int16(len(md.Nodes))
				default:
					n, err := strconv.ParseInt(rf, 10, 16)
					if err != nil || n < 1 {
						return usageErrorf("--replication-factor %q is not a positive number or \"all\"", rf)
					}
					spec.ReplicationFactor = int16(n)
				}
				resp, err := c.CreateTopic(ctx, spec)
				if err != nil {
					return err
				}
				out := topicJSON{Name: spec.Name, ID: resp.TopicID.String(), Partitions: resp.Partitions, ReplicationFactor: resp.ReplicationFactor}
				return a.emit(out, func(w io.Writer) {
					verb := "created"
					if validateOnly {
						verb, out.ID = "validated (not created)", "-"
					}
					fmt.Fprintf(w, "%s topic %s: id %s, %d partitions, replication factor %d\n", verb, out.Name, out.ID, out.Partitions, out.ReplicationFactor)
				})
			})
		},
	}
	cmd.Flags().Int32Var(&partitions, "partitions", 1, "number of partitions (1..16384)")
	cmd.Flags().StringVar(&rf, "replication-factor", "", `copies of each partition: a number, or "all" nodes (default: the cluster's default)`)
	cmd.Flags().StringArrayVar(&configs, "config", nil, "topic setting KEY=VALUE, repeatable: retention.ms (or retention_ms), retention.bytes (or retention_bytes)")
	cmd.Flags().BoolVar(&validateOnly, "validate-only", false, "check the request, create nothing")
	return cmd
}

func newTopicListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "list topics",
		Args:  argsRange(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClient(cmd, func(ctx context.Context, a *app, c *client.Client) error {
				topics, err := c.ListTopics(ctx)
				if err != nil {
					return err
				}
				out := make([]topicJSON, len(topics))
				for i, t := range topics {
					out[i] = topicJSON{Name: t.Name, ID: t.ID.String(), Partitions: t.Partitions, ReplicationFactor: t.ReplicationFactor}
				}
				return a.emit(out, func(w io.Writer) {
					tw := table(w)
					fmt.Fprintln(tw, "NAME\tID\tPARTITIONS\tREPLICATION")
					for _, t := range out {
						fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", t.Name, t.ID, t.Partitions, t.ReplicationFactor)
					}
					tw.Flush()
				})
			})
		},
	}
}

// routeJSON is a partition route in --json output.
type routeJSON struct {
	Partition        int32   `json:"partition"`
	Error            string  `json:"error,omitempty"`
	Primary          int32   `json:"primary"`
	Generation       int32   `json:"generation"`
	PreferredPrimary int32   `json:"preferred_primary"`
	Replicas         []int32 `json:"replicas"`
	InSync           []int32 `json:"in_sync"`
	Offline          []int32 `json:"offline"`
}

func routeOut(r wire.PartitionRoute) routeJSON {
	out := routeJSON{Partition: r.Partition, Primary: r.PrimaryID, Generation: r.Generation, PreferredPrimary: r.PreferredPrimaryID,
		Replicas: nonNil(r.Replicas), InSync: nonNil(r.InSync), Offline: nonNil(r.Offline)}
	if r.ErrorCode != wire.CodeNone {
		out.Error = wire.ErrorForCode(r.ErrorCode).(*wire.Error).Name
	}
	return out
}

func newTopicDescribeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "describe NAME",
		Short: "show a topic's partitions, their primaries and replicas, and its configuration",
		Args:  argsRange(1, 1, "one topic NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, func(ctx context.Context, a *app, c *client.Client) error {
				if _, err := requireTopic(ctx, c, args[0]); err != nil {
					return err
				}
				d, err := c.DescribeTopic(ctx, args[0])
				if err != nil {
					return err
				}
				type configJSON struct {
					Key       string `json:"key"`
					Value     string `json:"value"`
					IsDefault bool   `json:"is_default"`
				}
				out := struct {
					topicJSON
					Routes  []routeJSON  `json:"routes"`
					Configs []configJSON `json:"configs"`
				}{topicJSON: topicJSON{Name: d.Topic.Name, ID: d.Topic.ID.String(), Partitions: int32(len(d.Topic.Partitions)),
					ReplicationFactor: d.Topic.ReplicationFactor}, Routes: []routeJSON{}, Configs: []configJSON{}}
				for _, p := range d.Topic.Partitions {
					out.Routes = append(out.Routes, routeOut(p))
				}
				for _, cfg := range d.Configs {
					out.Configs = append(out.Configs, configJSON{cfg.Key, cfg.Value, cfg.IsDefault})
				}
				return a.emit(out, func(w io.Writer) {
					fmt.Fprintf(w, "topic %s: id %s, %d partitions, replication factor %d\n", out.Name, out.ID, out.Partitions, out.ReplicationFactor)
					tw := table(w)
					fmt.Fprintln(tw, "PARTITION\tPRIMARY\tGENERATION\tPREFERRED\tREPLICAS\tIN-SYNC\tOFFLINE\tERROR")
					for _, r := range out.Routes {
						fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", r.Partition, r.Primary, r.Generation, r.PreferredPrimary,
							ids(r.Replicas), ids(r.InSync), ids(r.Offline), orDash(r.Error))
					}
					tw.Flush()
					if len(out.Configs) > 0 {
						fmt.Fprintln(w, "configuration:")
						for _, cfg := range out.Configs {
							def := ""
							if cfg.IsDefault {
								def = " (default)"
							}
							fmt.Fprintf(w, "  %s = %s%s\n", cfg.Key, cfg.Value, def)
						}
					}
				})
			})
		},
	}
}

// requireTopic returns the partition count of topic, or
// UNKNOWN_TOPIC_OR_PARTITION at once when the cluster's metadata (fetched
// afresh when the client's copy lacks the topic) does not have it. Admin
// requests naming a missing topic are otherwise retried for seconds (the
// error is retriable, for metadata still spreading) and the broker's final
// message shows an all-zero topic id.
func requireTopic(ctx context.Context, c *client.Client, topic string) (int32, error) {
	return c.Partitions(ctx, topic)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newTopicDeleteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "delete a topic and all its data",
		Args:  argsRange(1, 1, "one topic NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, func(ctx context.Context, a *app, c *client.Client) error {
				if _, err := requireTopic(ctx, c, args[0]); err != nil {
					return err
				}
				id, err := c.DeleteTopic(ctx, args[0])
				if err != nil {
					return err
				}
				out := struct {
					Name string `json:"name"`
					ID   string `json:"id"`
				}{args[0], id.String()}
				return a.emit(out, func(w io.Writer) { fmt.Fprintf(w, "deleted topic %s (id %s)\n", out.Name, out.ID) })
			})
		},
	}
}

func newTopicAddPartitionsCmd() *cobra.Command {
	var total int32
	cmd := &cobra.Command{
		Use:   "add-partitions NAME --partitions TOTAL",
		Short: "raise a topic's partition count to TOTAL",
		Args:  argsRange(1, 1, "one topic NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, func(ctx context.Context, a *app, c *client.Client) error {
				// A total at or below the current count is the broker's to
				// refuse (INVALID_PARTITIONS, naming the count).
				if _, err := requireTopic(ctx, c, args[0]); err != nil {
					return err
				}
				n, err := c.AddPartitions(ctx, args[0], total)
				if err != nil {
					return err
				}
				out := struct {
					Name       string `json:"name"`
					Partitions int32  `json:"partitions"`
				}{args[0], n}
				return a.emit(out, func(w io.Writer) { fmt.Fprintf(w, "topic %s now has %d partitions\n", out.Name, out.Partitions) })
			})
		},
	}
	cmd.Flags().Int32Var(&total, "partitions", 0, "the new partition count (above the current one)")
	cmd.MarkFlagRequired("partitions")
	return cmd
}
