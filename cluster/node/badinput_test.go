package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/netio/wire"
)

// Limits of the node the bad-input tests run, small so that "over the
// maximum" is cheap to send.
const (
	badMaxFrameBytes = 64 << 10
	badMaxBatchBytes = 16 << 10
)

func smallFrames(cfg *config.Config) {
	cfg.Network.MaxFrameBytes = badMaxFrameBytes
	cfg.Storage.MaxBatchBytes = badMaxBatchBytes
}

// TestBadInput sends each kind of bad input on its own connection and
// checks the precise answer (or that the connection is closed, for
// framing errors); after each, a bystander connection opened before any of
// them is still served, produce and fetch included.
func TestBadInput(t *testing.T) {
	n := startNode(t, t.TempDir(), smallFrames)
	addr := n.ClientAddr()
	by := dialHandshaken(t, addr)
	id := by.createTopic("events", 2)
	ref := wire.PartitionRef{Topic: "events", TopicID: id, Partition: 1, Generation: wire.GenerationUnknown}
	produced := 0

	bystanderServed := func(t *testing.T) {
		t.Helper()
		if md := by.metadata(); len(md.Topics) != 1 || md.Topics[0].Name != "events" {
			t.Fatalf("bystander metadata: %+v", md.Topics)
		}
		produced++
		v := fmt.Sprintf("by-%d", produced)
		if _, err := by.produce(ref, v); err != nil {
			t.Fatalf("bystander produce: %v", err)
		}
		vals, _, err := by.fetch(ref, 0)
		if err != nil || len(vals) != produced || vals[produced-1] != v {
			t.Fatalf("bystander fetch: %v %v", vals, err)
		}
	}
	// answers sends frames on a fresh connection (handshaken first unless
	// raw) and wants one error response per frame with the given code, the
	// connection staying open (a Metadata request on it still works).
	answers := func(t *testing.T, handshake bool, want *wire.Error, frames ...[]byte) {
		t.Helper()
		rc := dialRaw(t, addr)
		if handshake {
			rc = dialHandshaken(t, addr)
		}
		for i, f := range frames {
			corr := uint32(1000 + i)
			binary.BigEndian.PutUint32(f[8:], corr)
			if err := rc.writeRaw(f); err != nil {
				t.Fatal(err)
			}
			err := rc.readFor(corr, nil)
			if !errors.Is(err, want) {
				t.Fatalf("frame %d: got %s (%v), want %s", i, code(err), err, want.Name)
			}
			var er *wire.ErrorResponse
			if errors.As(err, &er) && er.Message == "" {
				t.Fatalf("frame %d: %s without a message", i, want.Name)
			}
		}
		if handshake {
			rc.metadata()
		}
	}
	validProduce := func(ref wire.PartitionRef, values ...string) []byte {
		return wire.AppendRequest(nil, 0, 0, &wire.ProduceRequest{PartitionRef: ref, Records: mkBatch(t, values...)})
	}

	cases := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"random bytes", func(t *testing.T) {
			// Whatever the bytes say, the server answers with errors or
			// closes; it never hangs the shard or crashes.
			rng := rand.New(rand.NewPCG(1, 2))
			for i := 0; i < 20; i++ {
				rc := dialRaw(t, addr)
				junk := make([]byte, 1+rng.IntN(300))
				for j := range junk {
					junk[j] = byte(rng.Uint32())
				}
				if err := rc.writeRaw(junk); err != nil {
					t.Fatal(err)
				}
				rc.c.Close()
			}
		}},
		{"length below the header", func(t *testing.T) {
			rc := dialRaw(t, addr)
			rc.writeRaw([]byte{0, 0, 0, 3, 1, 2, 3})
			if got := rc.expectClosed(); len(got) != 0 {
				t.Fatalf("answered %v before closing", got)
			}
		}},
		{"truncated frame", func(t *testing.T) {
			rc := dialHandshaken(t, addr)
			f := validProduce(ref, "never")
			rc.writeRaw(f[:len(f)/2])
			rc.c.(interface{ CloseWrite() error }).CloseWrite()
			if got := rc.expectClosed(); len(got) != 0 {
				t.Fatalf("answered %v to half a frame", got)
			}
		}},
		{"length over the maximum", func(t *testing.T) {
			rc := dialHandshaken(t, addr)
			f := frame(wire.APIProduce, 0, 77, 0, make([]byte, 100))
			binary.BigEndian.PutUint32(f, badMaxFrameBytes+1)
			rc.writeRaw(f)
			h, body, err := rc.read()
			if err != nil || h.CorrelationID != 77 {
				t.Fatalf("oversize frame: %+v %v", h, err)
			}
			if err := wire.DecodeResponseBody(h, body, 0, nil); !errors.Is(err, wire.ErrMessageTooLarge) {
				t.Fatalf("oversize frame: %v", err)
			}
			rc.expectClosed()
		}},
		{"unknown API key", func(t *testing.T) {
			answers(t, true, wire.ErrUnsupportedVersion, frame(999, 0, 0, 0, nil), frame(wire.APIKey(len(wire.APIs())), 0, 0, 0, []byte("xyz")))
		}},
		{"unknown API version", func(t *testing.T) {
			answers(t, true, wire.ErrUnsupportedVersion, frame(wire.APIProduce, 7, 0, 0, nil), frame(wire.APIMetadata, 1, 0, 0, nil))
		}},
		{"unknown header flags", func(t *testing.T) {
			answers(t, true, wire.ErrInvalidRequest, frame(wire.APIMetadata, 0, 0, 1, wire.AppendRequest(nil, 0, 0, &wire.MetadataRequest{})[14:]))
		}},
		{"request before the handshake", func(t *testing.T) {
			answers(t, false, wire.ErrInvalidRequest, validProduce(ref, "early"))
		}},
		{"malformed bodies", func(t *testing.T) {
			p := validProduce(ref, "cut")
			var frames [][]byte
			for _, key := range []wire.APIKey{wire.APIHandshake, wire.APIMetadata, wire.APICreateTopic, wire.APICommitOffsets, wire.APIDescribePartition, wire.APIInitProducer} {
				frames = append(frames, frame(key, 0, 0, 0, []byte{0xff, 0xff, 0xff}))
			}
			// A produce cut inside its records, and one with bytes after them.
			cut := append([]byte(nil), p[:len(p)-5]...)
			binary.BigEndian.PutUint32(cut, uint32(len(cut)-4))
			long := append(append([]byte(nil), p...), 1, 2, 3)
			binary.BigEndian.PutUint32(long, uint32(len(long)-4))
			frames = append(frames, cut, long)
			answers(t, true, wire.ErrInvalidRequest, frames...)
		}},
		{"produce with a corrupt batch", func(t *testing.T) {
			f := validProduce(ref, "flipped")
			f[len(f)-2] ^= 0x40 // inside the records: the CRC no longer matches
			answers(t, true, wire.ErrCorruptMessage, f)
		}},
		{"produce over max_batch_bytes", func(t *testing.T) {
			big := make([]byte, badMaxBatchBytes)
			answers(t, true, wire.ErrMessageTooLarge, validProduce(ref, string(big)))
		}},
		{"unknown topic or partition", func(t *testing.T) {
			noTopic, noPart, oldID := ref, ref, ref
			noTopic.Topic = "nope"
			noPart.Partition = 2
			oldID.TopicID[0] ^= 1
			fetch := wire.AppendRequest(nil, 0, 0, &wire.FetchRequest{PartitionRef: noPart, MaxBytes: 100})
			list := wire.AppendRequest(nil, 0, 0, &wire.ListOffsetsRequest{PartitionRef: noTopic, Timestamp: wire.TimestampLatest})
			neg := ref
			neg.Partition = -1
			answers(t, true, wire.ErrUnknownTopicOrPartition,
				validProduce(noTopic, "x"), validProduce(noPart, "x"), validProduce(oldID, "x"), validProduce(neg, "x"), fetch, list)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.run(t)
			bystanderServed(t)
		})
	}
}
