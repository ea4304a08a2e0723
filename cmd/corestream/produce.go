package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/spf13/cobra"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/segment/batch"
)

func init() { commands = append(commands, newProduceCmd) }

// lineBytesMax bounds one input line: the largest record a request can
// carry. The broker may refuse smaller ones (storage.max_batch_bytes).
const lineBytesMax = wire.RecordsBytesMax - 1024

// produceTally counts outcomes; callbacks run on the producer's delivery
// goroutine while the reading goroutine counts sends.
type produceTally struct {
	mu       sync.Mutex
	acked    int
	failed   int
	firstErr error
}

func (t *produceTally) record(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err == nil {
		t.acked++
		return
	}
	t.failed++
	if t.firstErr == nil {
		t.firstErr = err
	}
}

func newProduceCmd() *cobra.Command {
	var partition int32
	var keySep, compression, acks string
	cmd := &cobra.Command{
		Use:   "produce TOPIC [--partition P] [--key-separator S]",
		Short: "send each line of standard input as one message",
		Long: "produce sends each line of standard input (without its line ending) as one message and\n" +
			"exits 0 only when every message is acknowledged; otherwise it says how many were not and exits 1.",
		Args: argsRange(1, 1, "one TOPIC"),
		RunE: func(cmd *cobra.Command, args []string) error {
			a := appFrom(cmd)
			// Each message gets --timeout to be acknowledged, so a batch
			// the cluster cannot take fails with the broker's own error
			// (NOT_ENOUGH_REPLICAS, …) before the command gives up.
			cfg := client.ProducerConfig{DeliveryTimeout: a.timeout}
			if partition >= 0 {
				cfg.Partitioner = client.ManualPartitioner()
			}
			codec, err := parseCodec(compression)
			if err != nil {
				return err
			}
			cfg.Compression = codec
			switch acks {
			case "quorum":
				cfg.Acks = wire.AcksQuorum
			case "primary":
				cfg.Acks = wire.AcksPrimary
			default:
				return usageErrorf("--acks %q is not quorum or primary", acks)
			}
			c, err := a.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			return produceLines(cmd.Context(), a, c, cfg, args[0], partition, keySep)
		},
	}
	cmd.Flags().Int32Var(&partition, "partition", -1, "send every message to this partition (default: by key hash, keyless ones spread)")
	cmd.Flags().StringVar(&keySep, "key-separator", "", "split each line at the first S into key and value (default: no key)")
	cmd.Flags().StringVar(&compression, "compression", "none", "batch compression: none, gzip, snappy, lz4, zstd")
	cmd.Flags().StringVar(&acks, "acks", "quorum", "acknowledgement level: quorum or primary")
	return cmd
}

// parseCodec reads a --compression value.
func parseCodec(s string) (batch.Codec, error) {
	for _, c := range []batch.Codec{batch.CodecNone, batch.CodecGzip, batch.CodecSnappy, batch.CodecLZ4, batch.CodecZstd} {
		if c.String() == s {
			return c, nil
		}
	}
	return 0, usageErrorf("--compression %q is not one of none, gzip, snappy, lz4, zstd", s)
}

// produceLines sends stdin's lines and waits for their acknowledgements.
func produceLines(ctx context.Context, a *app, c *client.Client, cfg client.ProducerConfig, topic string, partition int32, keySep string) error {
	initCtx, cancel := context.WithTimeout(ctx, a.timeout)
	p, err := c.NewProducer(initCtx, cfg)
	cancel()
	if err != nil {
		return err
	}
	var tally produceTally
	sent := 0
	cb := func(_ client.Produced, err error) { tally.record(err) }
	sc := bufio.NewScanner(a.stdin)
	sc.Buffer(make([]byte, 0, 64<<10), lineBytesMax)
	var readErr error
	for line := 1; sc.Scan(); line++ {
		rec := client.Record{Topic: topic, Partition: partition, Value: sc.Bytes()}
		if keySep != "" {
			k, v, ok := bytes.Cut(rec.Value, []byte(keySep))
			if !ok {
				tally.record(fmt.Errorf("line %d has no key separator %q", line, keySep))
				sent++
				continue
			}
			rec.Key, rec.Value = k, v
		}
		// Waiting for buffer space needs no timeout: acknowledgements or
		// the producer's delivery timeout always free it.
		err := p.ProduceAsync(ctx, rec, cb)
		sent++
		if err != nil {
			tally.record(err)
			if errors.Is(err, client.ErrProducerFenced) || errors.Is(err, wire.ErrUnknownTopicOrPartition) || ctx.Err() != nil {
				break // every later line would fail the same way
			}
		}
	}
	if err := sc.Err(); err != nil {
		readErr = fmt.Errorf("reading standard input after %d lines: %w", sent, err)
	}
	closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), a.timeout)
	defer cancel()
	closeErr := p.Close(closeCtx)
	tally.mu.Lock()
	defer tally.mu.Unlock()
	notAcked := sent - tally.acked
	out := struct {
		Sent         int `json:"sent"`
		Acknowledged int `json:"acknowledged"`
		Failed       int `json:"failed"`
	}{sent, tally.acked, notAcked}
	if a.json {
		a.emit(out, nil)
	}
	switch {
	case notAcked > 0:
		cause := tally.firstErr
		if cause == nil {
			cause = closeErr
		}
		err := fmt.Errorf("%d of %d messages were not acknowledged", notAcked, sent)
		if cause != nil {
			err = fmt.Errorf("%w; first error: %w", err, cause)
		}
		return errors.Join(err, readErr)
	case readErr != nil:
		return readErr
	}
	return nil
}
