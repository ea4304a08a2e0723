package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/netio/wire"
)

func init() { commands = append(commands, newClusterCmd) }

func newClusterCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "cluster", Short: "cluster status, primary balance and replica moves", RunE: groupRun}
	cmd.AddCommand(newClusterStatusCmd(), newClusterRebalanceCmd(), newClusterReassignCmd(), newClusterAddNodeCmd(), newClusterRemoveNodeCmd())
	return cmd
}

// nodeJSON is a node in `cluster status --json`.
type nodeJSON struct {
	ID                 int32  `json:"id"`
	ClientAddr         string `json:"client_addr"`
	HTTPAddr           string `json:"http_addr"`
	KafkaAddr          string `json:"kafka_addr"`
	Alive              bool   `json:"alive"`
	Rack               string `json:"rack"`
	Primaries          int32  `json:"primaries"`
	PreferredPrimaries int32  `json:"preferred_primaries"`
	Replicas           int32  `json:"replicas"`
	Draining           bool   `json:"draining"`
	// State is the node's roster state (joining, active, leaving); empty
	// when the roster could not be read.
	State string `json:"state,omitempty"`
}

func newClusterStatusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "show the nodes, which are alive, the metadata primary and the primaries per node",
		Args:  argsRange(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClient(cmd, func(ctx context.Context, a *app, c *client.Client) error {
				st, err := c.ClusterStatus(ctx)
				if err != nil {
					return err
				}
				// Racks come with the metadata (each node's node.rack);
				// without an answer the column stays empty rather than
				// failing a status that has its figures.
				racks := map[int32]string{}
				if md, err := c.Metadata(ctx); err == nil {
					for _, n := range md.Nodes {
						racks[n.ID] = n.Rack
					}
				}
				// The committed roster names each node's state
				// (docs/design/membership.md); a node without the call,
				// or a user without the cluster permission, shows none.
				states := map[int32]string{}
				if r, err := c.ChangeRoster(ctx, &wire.ChangeRosterRequest{Action: wire.RosterList}); err == nil {
					for _, m := range r.Members {
						states[m.ID] = m.State
					}
				}
				out := struct {
					ClusterID           string     `json:"cluster_id"`
					MetadataPrimary     int32      `json:"metadata_primary"`
					MetadataGeneration  int32      `json:"metadata_generation"`
					RebalanceInProgress bool       `json:"rebalance_in_progress"`
					Partitions          int32      `json:"partitions"`
					UnderReplicated     int32      `json:"under_replicated"`
					Offline             int32      `json:"offline"`
					Nodes               []nodeJSON `json:"nodes"`
				}{st.ClusterID, st.MetadataPrimaryID, st.MetadataGeneration, st.RebalanceInProgress, st.Partitions, st.UnderReplicated, st.Offline, []nodeJSON{}}
				for _, n := range st.Nodes {
					out.Nodes = append(out.Nodes, nodeJSON{n.ID, n.ClientAddr, n.HTTPAddr, n.KafkaAddr, n.Alive, racks[n.ID], n.Primaries, n.PreferredPrimaries, n.Replicas, n.Draining, states[n.ID]})
				}
				return a.emit(out, func(w io.Writer) {
					mp := "none (no quorum)"
					if out.MetadataPrimary != wire.NodeNone {
						mp = fmt.Sprintf("node %d (generation %d)", out.MetadataPrimary, out.MetadataGeneration)
					}
					cid := out.ClusterID
					if cid == "" {
						cid = "not minted yet"
					}
					fmt.Fprintf(w, "cluster id: %s\n", cid)
					fmt.Fprintf(w, "metadata primary: %s\n", mp)
					fmt.Fprintf(w, "partitions: %d (under-replicated %d, offline %d)\n", out.Partitions, out.UnderReplicated, out.Offline)
					fmt.Fprintf(w, "rebalance in progress: %s\n", yesNo(out.RebalanceInProgress))
					tw := table(w)
					fmt.Fprintln(tw, "NODE\tCLIENT ADDRESS\tKAFKA ADDRESS\tRACK\tALIVE\tDRAINING\tPRIMARIES\tPREFERRED\tREPLICAS\tSTATE")
					for _, n := range out.Nodes {
						kafka, rack, state := n.KafkaAddr, n.Rack, n.State
						if state == "" {
							state = "-"
						}
						if kafka == "" {
							kafka = "-"
						}
						if rack == "" {
							rack = "-"
						}
						fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\n", n.ID, n.ClientAddr, kafka, rack, yesNo(n.Alive), yesNo(n.Draining), n.Primaries, n.PreferredPrimaries, n.Replicas, state)
					}
					tw.Flush()
				})
			})
		},
	}
}

// moveJSON is one primary move.
type moveJSON struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	From      int32  `json:"from"`
	To        int32  `json:"to"`
}

func newClusterRebalanceCmd() *cobra.Command {
	var dryRun, preferred bool
	var movesMax uint32
	cmd := &cobra.Command{
		Use:   "rebalance [--dry-run] [--preferred]",
		Short: "move primaries toward an even count per node, or back to their preferred replicas (one at a time)",
		Args:  argsRange(0, 0, "no arguments"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClient(cmd, func(ctx context.Context, a *app, c *client.Client) error {
				plan, err := c.RebalanceRequest(ctx, &wire.RebalanceRequest{DryRun: dryRun, MovesMax: movesMax, Preferred: preferred})
				if err != nil {
					return err
				}
				out := struct {
					DryRun  bool       `json:"dry_run"`
					Started bool       `json:"started"`
					Moves   []moveJSON `json:"moves"`
				}{dryRun, plan.Started, []moveJSON{}}
				for _, m := range plan.Moves {
					out.Moves = append(out.Moves, moveJSON{m.Topic, m.Partition, m.FromNode, m.ToNode})
				}
				return a.emit(out, func(w io.Writer) {
					switch {
					case len(out.Moves) == 0:
						fmt.Fprintln(w, "balanced: no primary to move")
						return
					case dryRun:
						fmt.Fprintf(w, "dry run: %d primary moves planned\n", len(out.Moves))
					case out.Started:
						fmt.Fprintf(w, "started %d primary moves (one at a time; see cluster status)\n", len(out.Moves))
					default:
						fmt.Fprintf(w, "%d primary moves planned, not started\n", len(out.Moves))
					}
					for _, m := range out.Moves {
						fmt.Fprintf(w, "  %s/%d: node %d -> node %d\n", m.Topic, m.Partition, m.From, m.To)
					}
				})
			})
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "only show the moves")
	cmd.Flags().BoolVar(&preferred, "preferred", false, "only move primaries back to their preferred replica (the first of the replica list), every one led away")
	cmd.Flags().Uint32Var(&movesMax, "max-moves", 0, "plan at most N moves (0: no limit)")
	return cmd
}
