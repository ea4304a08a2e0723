package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/segment/batch"
)

func init() { commands = append(commands, newProduceCmd) }

// lineBytesMax bounds one input line: the largest record a request can
// carry. The broker may refuse smaller ones (storage.max_batch_bytes).
const lineBytesMax = wire.RecordsBytesMax - 1024

func newProduceCmd() *cobra.Command {
	var partition int32
	var keySep, compression, acks string
	var headerFlags []string
	cmd := &cobra.Command{
		Use:   "produce TOPIC [--partition P] [--key-separator S] [-H KEY=VALUE]...",
		Short: "send each line of standard input as one message",
		Long: "produce sends each line of standard input (without its line ending) as one message and\n" +
			"exits 0 only when every line is acknowledged. At the first line it cannot deliver it stops\n" +
			"reading, says exactly which lines were acknowledged, and exits 1; a line gets --timeout to be\n" +
			"acknowledged, so produce never waits longer than that for a cluster that stopped answering.\n\n" +
			"Records with a key go to the partition of its hash (Kafka's). Records without one are\n" +
			"spread: runs of records on one partition, the next run on the next partition, the runs\n" +
			"growing from one record to 16 KiB (Kafka's batch.size), so that a long input is sent in\n" +
			"full batches and a short one still reaches every partition. -H adds a header to every\n" +
			"record (repeatable, as kcat's -H).",
		Args: argsRange(1, 1, "one TOPIC"),
		RunE: func(cmd *cobra.Command, args []string) error {
			a := appFrom(cmd)
			// Each line gets --timeout to be acknowledged. The producer's
			// own bound is a little shorter, so that a batch the cluster
			// cannot take fails with the broker's error (NOT_ENOUGH_REPLICAS,
			// …) before produce gives up on it. StopOnFailure: no line is
			// written after a line of its partition that was not.
			cfg := client.ProducerConfig{DeliveryTimeout: a.timeout - deliveryMargin(a.timeout), StopOnFailure: true}
			cfg.Partitioner = client.StickySpreadPartitioner(client.StickyRunBytesDefault)
			if partition >= 0 {
				cfg.Partitioner = client.ManualPartitioner()
			}
			headers, err := parseHeaders(headerFlags)
			if err != nil {
				return err
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
			return produceLines(cmd.Context(), a, c, cfg, produceTarget{topic: args[0], partition: partition, keySep: keySep, headers: headers})
		},
	}
	cmd.Flags().Int32Var(&partition, "partition", -1, "send every message to this partition (default: by key hash, keyless ones spread)")
	cmd.Flags().StringVar(&keySep, "key-separator", "", "split each line at the first S into key and value (default: no key)")
	cmd.Flags().StringVar(&compression, "compression", "none", "batch compression: none, gzip, snappy, lz4, zstd")
	cmd.Flags().StringVar(&acks, "acks", "quorum", "acknowledgement level: quorum or primary")
	cmd.Flags().StringArrayVarP(&headerFlags, "header", "H", nil, "add header KEY=VALUE to every message (repeatable; the value may be empty, the key may not)")
	return cmd
}

// parseHeaders reads the -H KEY=VALUE flags, in order (a key may
// repeat, as Kafka headers may).
func parseHeaders(flags []string) ([]client.Header, error) {
	var out []client.Header
	for _, f := range flags {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return nil, usageErrorf("-H %q is not KEY=VALUE with a KEY", f)
		}
		out = append(out, client.Header{Key: []byte(k), Value: []byte(v)})
	}
	return out, nil
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
