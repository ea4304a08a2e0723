package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/netio/wire"
)

// resetJSON is one partition of group reset-offsets --json.
type resetJSON struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Current is the committed offset before the reset, -1 when none.
	Current int64 `json:"current"`
	New     int64 `json:"new"`
}

// resetTarget says where reset-offsets moves each partition.
type resetTarget struct {
	earliest, latest bool
	offset           int64 // with toOffset
	toOffset         bool
	at               time.Time // with toTime
	toTime           bool
}

// datetimeLayouts are the forms --to-datetime accepts: RFC 3339, and
// Kafka's kafka-consumer-groups form without a zone (UTC).
var datetimeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05.000", "2006-01-02T15:04:05"}

func parseDatetime(s string) (time.Time, error) {
	for _, l := range datetimeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, usageErrorf("--to-datetime %q: want RFC 3339 (2026-12-01T20:00:00Z) or 2026-12-01T20:00:00[.000] (UTC)", s)
}

// newOffset is where target puts topic/p: clamped into the log
// [earliest, latest] for --to-offset, as Kafka does.
func (r resetTarget) newOffset(ctx context.Context, c *client.Client, topic string, p int32) (int64, error) {
	list := func(ts int64) (int64, error) {
		lo, err := c.ListOffsets(ctx, topic, p, ts)
		if err != nil {
			return 0, fmt.Errorf("%s/%d: %w", topic, p, err)
		}
		if lo.Offset < 0 {
			return lo.HighWatermark, nil
		}
		return lo.Offset, nil
	}
	switch {
	case r.earliest:
		return list(wire.TimestampEarliest)
	case r.latest:
		return list(wire.TimestampLatest)
	case r.toTime:
		return list(r.at.UnixMilli())
	}
	lo, err := list(wire.TimestampEarliest)
	if err != nil {
		return 0, err
	}
	hi, err := list(wire.TimestampLatest)
	if err != nil {
		return 0, err
	}
	return min(max(r.offset, lo), hi), nil
}

func newGroupResetCmd() *cobra.Command {
	var topic, datetime string
	var earliest, latest, dryRun bool
	var offset int64
	cmd := &cobra.Command{
		Use:   "reset-offsets GROUP --topic T (--to-earliest | --to-latest | --to-offset N | --to-datetime T) [--dry-run]",
		Short: "move an inactive group's committed offsets of a topic's partitions",
		Args:  argsRange(1, 1, "one GROUP"),
		RunE: func(cmd *cobra.Command, args []string) error {
			group := args[0]
			r := resetTarget{earliest: earliest, latest: latest, toOffset: cmd.Flags().Changed("to-offset"), offset: offset,
				toTime: datetime != ""}
			n := 0
			for _, on := range []bool{r.earliest, r.latest, r.toOffset, r.toTime} {
				if on {
					n++
				}
			}
			switch {
			case topic == "":
				return usageErrorf("reset-offsets needs --topic")
			case n != 1:
				return usageErrorf("reset-offsets needs exactly one of --to-earliest, --to-latest, --to-offset, --to-datetime")
			case r.toOffset && offset < 0:
				return usageErrorf("--to-offset %d is negative", offset)
			}
			if r.toTime {
				t, err := parseDatetime(datetime)
				if err != nil {
					return err
				}
				r.at = t
			}
			return withClient(cmd, func(ctx context.Context, a *app, c *client.Client) error {
				return resetOffsets(ctx, a, c, group, topic, r, dryRun)
			})
		},
	}
	cmd.Flags().StringVar(&topic, "topic", "", "the topic whose partitions are reset (all of them)")
	cmd.Flags().BoolVar(&earliest, "to-earliest", false, "to each partition's log start")
	cmd.Flags().BoolVar(&latest, "to-latest", false, "to each partition's end (high watermark)")
	cmd.Flags().Int64Var(&offset, "to-offset", 0, "to this offset (clamped into each partition's log)")
	cmd.Flags().StringVar(&datetime, "to-datetime", "", "to the first record at or after this time (RFC 3339, or 2006-01-02T15:04:05 in UTC)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "show the new offsets without committing them")
	return cmd
}

// resetOffsets moves group's offsets of every partition of topic, as
// Kafka's kafka-consumer-groups --reset-offsets: only while the group
// has no members (the coordinator refuses it otherwise too).
func resetOffsets(ctx context.Context, a *app, c *client.Client, group, topic string, r resetTarget, dryRun bool) error {
	if d, err := c.DescribeGroup(ctx, group); err == nil && len(d.Members) > 0 {
		return fmt.Errorf("group %q has %d members (%s): offsets are reset only for an inactive group; stop its consumers first",
			group, len(d.Members), d.State)
	}
	desc, err := c.DescribeTopic(ctx, topic)
	if err != nil {
		return err
	}
	parts, topicID := int32(len(desc.Topic.Partitions)), desc.Topic.ID
	var tps []wire.TopicPartition
	for p := int32(0); p < parts; p++ {
		tps = append(tps, wire.TopicPartition{Topic: topic, Partition: p})
	}
	current, err := c.FetchGroupOffsets(ctx, group, tps)
	if err != nil {
		return fmt.Errorf("reading group %q's offsets: %w", group, err)
	}
	cur := map[int32]int64{}
	for _, o := range current {
		cur[o.Partition] = o.Offset
	}
	out := []resetJSON{}
	var commits []wire.OffsetCommit
	for p := int32(0); p < parts; p++ {
		off, err := r.newOffset(ctx, c, topic, p)
		if err != nil {
			return err
		}
		c0, ok := cur[p]
		if !ok {
			c0 = -1
		}
		out = append(out, resetJSON{Topic: topic, Partition: p, Current: c0, New: off})
		commits = append(commits, wire.OffsetCommit{Topic: topic, TopicID: topicID, Partition: p, Offset: off})
	}
	if !dryRun {
		if err := c.CommitGroupOffsets(ctx, group, "", -1, commits); err != nil {
			return fmt.Errorf("committing group %q's new offsets: %w", group, err)
		}
	}
	return a.emit(out, func(w io.Writer) {
		tw := table(w)
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tCURRENT\tNEW")
		for _, o := range out {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", o.Topic, o.Partition, o.Current, o.New)
		}
		tw.Flush()
		if dryRun {
			fmt.Fprintln(w, "dry run: nothing committed")
		}
	})
}
