package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/netio/wire"
)

func init() { commands = append(commands, newConsumeCmd) }

// consumeOpts are the consume command's flags.
type consumeOpts struct {
	partition int32
	from      string
	count     int
	follow    bool
	consumer  string
	printKey  bool
	keySep    string
	rack      string
	// group consumes as a member of this consumer group (consume_group.go).
	group string
	// format is --format parsed; nil: the default output.
	format recordFormat
}

func newConsumeCmd() *cobra.Command {
	var o consumeOpts
	var formatFlag string
	cmd := &cobra.Command{
		Use:   "consume TOPIC [--partition P] --from earliest|latest|OFFSET|TIME [--count N] [--follow]",
		Short: "print messages, one value per line",
		Long: "consume prints one message value per line. It stops after --count messages; with --follow it\n" +
			"keeps waiting for new ones; with neither it stops at the end of each partition as it was at start.",
		Args: argsRange(1, 1, "one TOPIC"),
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			if o.count < 0 {
				return usageErrorf("--count %d is negative", o.count)
			}
			if o.group != "" && (o.consumer != "" || o.partition >= 0 || o.follow) {
				return usageErrorf("--group takes its partitions from the group: it goes without --consumer, --partition and --follow")
			}
			if formatFlag != "" {
				if a := appFrom(cmd); a.json {
					return usageErrorf("--format and --json are two outputs: give one")
				}
				if o.format, err = parseFormat(formatFlag); err != nil {
					return err
				}
			}
			from := o.from
			if o.group != "" && !cmd.Flags().Changed("from") {
				from = "earliest" // where a partition without a committed offset starts
			}
			start, err := parseStart(from, o.consumer)
			if err != nil {
				return err
			}
			a := appFrom(cmd)
			c, err := a.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			if o.group != "" {
				return consumeGroup(cmd.Context(), a, c, args[0], start, o)
			}
			return consume(cmd.Context(), a, c, args[0], start, o)
		},
	}
	f := cmd.Flags()
	f.Int32Var(&o.partition, "partition", -1, "read only this partition (default: every partition)")
	f.StringVar(&o.from, "from", "earliest", "where to start: earliest, latest, an OFFSET, a TIME (RFC 3339), or committed (with --consumer)")
	f.IntVar(&o.count, "count", 0, "exit after N messages (0: no limit)")
	f.BoolVar(&o.follow, "follow", false, "keep waiting for new messages")
	f.StringVar(&o.consumer, "consumer", "", "consumer name: commit the positions reached under it on exit")
	f.BoolVar(&o.printKey, "print-key", false, "print the key before each value")
	f.StringVar(&o.keySep, "key-separator", "\t", "what separates key and value with --print-key")
	f.StringVar(&o.rack, "rack", "", "read from in-sync replicas in rack NAME (a node.rack) when the primary names one (follower reads)")
	f.StringVar(&o.group, "group", "", "consume as a member of consumer group G: share the partitions with its other members, start at its committed offsets, commit as you go and leave on exit; runs until interrupted or --count")
	f.StringVarP(&formatFlag, "format", "f", "", "print each message as this format (kcat's): %t topic, %p partition, %o offset, %k key, %K key length, %s value, %S value length, %T timestamp ms, %h headers (key=value,...), %% a percent; \\n \\t")
	return cmd
}

// parseStart reads --from.
func parseStart(from, consumer string) (client.Start, error) {
	switch from {
	case "earliest":
		return client.StartEarliest, nil
	case "latest":
		return client.StartLatest, nil
	case "committed":
		if consumer == "" {
			return client.Start{}, usageErrorf("--from committed needs --consumer")
		}
		return client.StartCommitted(client.StartEarliest), nil
	}
	if off, err := strconv.ParseInt(from, 10, 64); err == nil {
		if off < 0 {
			return client.Start{}, usageErrorf("--from offset %d is negative", off)
		}
		return client.StartAt(off), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, from); err == nil {
		return client.StartAtTime(t), nil
	}
	return client.Start{}, usageErrorf("--from %q is not earliest, latest, committed, an offset or an RFC 3339 time", from)
}

// recordJSON is one message in --json output. Key and value are strings;
// bytes that are not UTF-8 are replaced by U+FFFD.
type recordJSON struct {
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Timestamp string  `json:"timestamp"`
	Key       *string `json:"key"`
	Value     *string `json:"value"`
}

// consume assigns the partitions and prints until the stop condition.
func consume(ctx context.Context, a *app, c *client.Client, topic string, start client.Start, o consumeOpts) error {
	cs, err := c.NewConsumer(client.ConsumerConfig{Name: o.consumer, Rack: o.rack})
	if err != nil {
		return err
	}
	defer cs.Close()
	setup, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	var parts []int32
	if o.partition >= 0 {
		parts = []int32{o.partition}
	} else {
		n, err := c.Partitions(setup, topic)
		if err != nil {
			return err
		}
		for i := int32(0); i < n; i++ {
			parts = append(parts, i)
		}
	}
	// Without --follow, stop at each partition's end as it is now.
	ends := map[int32]int64{}
	if !o.follow {
		for _, p := range parts {
			r, err := c.ListOffsets(setup, topic, p, wire.TimestampLatest)
			if err != nil {
				return &client.PartitionError{Topic: topic, Partition: p, Err: err}
			}
			ends[p] = r.Offset
		}
	}
	if err := cs.Assign(setup, topic, parts, start); err != nil {
		return err
	}
	// next is, per partition, the offset after the last record printed:
	// what --consumer commits (Poll may return more than is printed).
	next := map[int32]int64{}
	for _, p := range parts {
		next[p], _ = cs.Position(topic, p)
	}
	w := bufio.NewWriter(a.stdout)
	defer w.Flush()
	printed := 0
	done := func() bool {
		if o.count > 0 && printed >= o.count {
			return true
		}
		if o.follow {
			return false
		}
		for _, p := range parts {
			if pos, _ := cs.Position(topic, p); pos < ends[p] {
				return false
			}
		}
		return true
	}
	var pollErr error
	for !done() {
		pollCtx, cancel := context.WithTimeout(ctx, a.timeout)
		if o.follow {
			pollCtx, cancel = context.WithCancel(ctx)
		}
		recs, err := cs.Poll(pollCtx)
		cancel()
		if err != nil {
			if ctx.Err() != nil && o.follow {
				break // interrupted: a normal end for --follow
			}
			var pe *client.PartitionError
			if errors.As(err, &pe) && !errors.Is(err, client.ErrTopicRecreated) && wire.IsRetriable(err) {
				fmt.Fprintf(a.stderr, "corestream: %v (retrying)\n", err)
				continue
			}
			if errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("no messages for %v before reaching the end offsets: %w", a.timeout, err)
			}
			pollErr = err
			break
		}
		for i := range recs {
			r := &recs[i]
			if !o.follow && r.Offset >= ends[r.Partition] {
				continue
			}
			if o.count > 0 && printed >= o.count {
				break
			}
			printRecord(w, a.json, r, o)
			printed++
			next[r.Partition] = r.Offset + 1
		}
		w.Flush()
	}
	if o.consumer != "" {
		commitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.timeout)
		defer cancel()
		offsets := make([]wire.OffsetCommit, 0, len(parts))
		for _, p := range parts {
			offsets = append(offsets, wire.OffsetCommit{Topic: topic, Partition: p, Offset: next[p]})
		}
		if err := c.CommitOffsets(commitCtx, o.consumer, offsets); err != nil {
			return errors.Join(pollErr, fmt.Errorf("committing positions of %s: %w", o.consumer, err))
		}
	}
	return pollErr
}

func printRecord(w *bufio.Writer, asJSON bool, r *client.Record, o consumeOpts) {
	if asJSON {
		out := recordJSON{Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UTC().Format(time.RFC3339Nano)}
		if r.Key != nil {
			k := string(r.Key)
			out.Key = &k
		}
		if r.Value != nil {
			v := string(r.Value)
			out.Value = &v
		}
		b, _ := json.Marshal(out)
		w.Write(b)
		w.WriteByte('\n')
		return
	}
	if o.format != nil {
		o.format.print(w, r)
		return
	}
	if o.printKey {
		w.Write(r.Key)
		w.WriteString(o.keySep)
	}
	w.Write(r.Value)
	w.WriteByte('\n')
}
