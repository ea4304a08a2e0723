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

// Growing and shrinking the roster (docs/design/membership.md):
// cluster add-node and cluster remove-node.

// memberJSON is one roster node in --json output.
type memberJSON struct {
	ID              int32  `json:"id"`
	ClientAddr      string `json:"client_addr"`
	ReplicationAddr string `json:"replication_addr"`
	HTTPAddr        string `json:"http_addr,omitempty"`
	KafkaAddr       string `json:"kafka_addr,omitempty"`
	Rack            string `json:"rack,omitempty"`
	State           string `json:"state"`
}

// parseNodeID reads a node id argument (1..32).
func parseNodeID(s string) (int32, error) {
	id, err := strconv.ParseInt(s, 10, 32)
	if err != nil || id < 1 || id > wire.RosterNodesMax {
		return 0, usageErrorf("%q is not a node id (1..%d)", s, wire.RosterNodesMax)
	}
	return int32(id), nil
}

// emitRoster prints the roster after a change.
func emitRoster(a *app, what string, resp *wire.ChangeRosterResponse) error {
	out := struct {
		Members []memberJSON `json:"members"`
	}{[]memberJSON{}}
	for _, m := range resp.Members {
		out.Members = append(out.Members, memberJSON{m.ID, m.ClientAddr, m.ReplicationAddr, m.HTTPAddr, m.KafkaAddr, m.Rack, m.State})
	}
	return a.emit(out, func(w io.Writer) {
		fmt.Fprintln(w, what)
		tw := table(w)
		fmt.Fprintln(tw, "NODE\tCLIENT ADDRESS\tREPLICATION ADDRESS\tRACK\tSTATE")
		for _, m := range out.Members {
			rack := m.Rack
			if rack == "" {
				rack = "-"
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", m.ID, m.ClientAddr, m.ReplicationAddr, rack, m.State)
		}
		tw.Flush()
	})
}

func newClusterAddNodeCmd() *cobra.Command {
	var m wire.RosterMember
	cmd := &cobra.Command{
		Use:   "add-node ID --addr HOST:PORT --replication-addr HOST:PORT [--http-addr A] [--kafka-addr A] [--rack R]",
		Short: "add a node to the roster; start it first with cluster.join = true (it becomes active once it caught up)",
		Args:  argsRange(1, 1, "one node id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseNodeID(args[0])
			if err != nil {
				return err
			}
			if m.ClientAddr == "" || m.ReplicationAddr == "" {
				return usageErrorf("add-node needs --addr (the node's client address) and --replication-addr")
			}
			m.ID = id
			return withClient(cmd, func(ctx context.Context, a *app, c *client.Client) error {
				resp, err := c.ChangeRoster(ctx, &wire.ChangeRosterRequest{Action: wire.RosterAdd, Member: m})
				if err != nil {
					return err
				}
				return emitRoster(a, fmt.Sprintf("node %d recorded as joining; it becomes active once the metadata group promoted it (see cluster status)", id), resp)
			})
		},
	}
	cmd.Flags().StringVar(&m.ClientAddr, "addr", "", "the node's advertised client address (its node.client_addr)")
	cmd.Flags().StringVar(&m.ReplicationAddr, "replication-addr", "", "the node's replication address (its node.replication_addr)")
	cmd.Flags().StringVar(&m.HTTPAddr, "http-addr", "", "the node's advertised HTTP address, if it serves one")
	cmd.Flags().StringVar(&m.KafkaAddr, "kafka-addr", "", "the node's advertised Kafka address, if it serves one")
	cmd.Flags().StringVar(&m.Rack, "rack", "", "the node's rack (its node.rack)")
	return cmd
}

func newClusterRemoveNodeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "remove-node ID",
		Short: "remove a node that holds no replica (drain it first) from the roster",
		Args:  argsRange(1, 1, "one node id"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseNodeID(args[0])
			if err != nil {
				return err
			}
			return withClient(cmd, func(ctx context.Context, a *app, c *client.Client) error {
				resp, err := c.ChangeRoster(ctx, &wire.ChangeRosterRequest{Action: wire.RosterRemove, Member: wire.RosterMember{ID: id}})
				if err != nil {
					return err
				}
				return emitRoster(a, fmt.Sprintf("node %d is leaving; it is gone from the roster once the metadata group removed it (see cluster status)", id), resp)
			})
		},
	}
}
