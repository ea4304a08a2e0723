package bench

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestSpecValidate(t *testing.T) {
	ok := func(mode Mode) Spec { s := DefaultSpec(mode); s.Brokers = []string{"b"}; return s }
	for _, mode := range []Mode{ModeProduce, ModeConsume, ModeE2E} {
		s := ok(mode)
		if err := s.Validate(); err != nil {
			t.Errorf("defaults of %s: %v", mode, err)
		}
	}
	tests := []struct {
		name string
		edit func(*Spec)
		want string
	}{
		{"mode", func(s *Spec) { s.Mode = "fetch" }, "mode"},
		{"no brokers", func(s *Spec) { s.Brokers = nil }, "no brokers"},
		{"no topic", func(s *Spec) { s.Topic = "" }, "no topic"},
		{"partitions", func(s *Spec) { s.Partitions = 0 }, "--partitions"},
		{"too many partitions", func(s *Spec) { s.Partitions = partitionsMax + 1 }, "--partitions"},
		{"factor", func(s *Spec) { s.ReplicationFactor = 33 }, "--replication-factor"},
		{"actors", func(s *Spec) { s.Producers = actorsMax + 1 }, "producers and consumers"},
		{"small message", func(s *Spec) { s.MessageBytes = headerBytes - 1 }, "--message-bytes"},
		{"batch", func(s *Spec) { s.BatchBytes = 0 }, "--batch-bytes"},
		{"negative rate", func(s *Spec) { s.Rate = -1 }, "must not be negative"},
		{"neither count nor time", func(s *Spec) { s.Messages, s.Duration = 0, 0 }, "--messages or --duration"},
		{"acks", func(s *Spec) { s.Acks = "all" }, "--acks"},
		{"compression", func(s *Spec) { s.Compression = "brotli" }, "--compression"},
		{"no producer", func(s *Spec) { s.Producers = 0 }, "at least one producer"},
		{"consumers beyond partitions", func(s *Spec) { s.Mode, s.Consumers = ModeE2E, 2 }, "each consumer needs a partition"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := ok(ModeProduce)
			tc.edit(&s)
			err := s.Validate()
			if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrSpec mentioning %q", err, tc.want)
			}
		})
	}
	s := ok(ModeConsume)
	s.Messages, s.Duration = 0, time.Second
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "needs --messages") {
		t.Fatalf("consume without --messages: %v", err)
	}
}

// Args must reproduce the spec exactly through the flags a load
// generator parses: bench compare depends on it.
func TestSpecArgsRoundTrip(t *testing.T) {
	want := Spec{Mode: ModeE2E, Topic: "t-1", Partitions: 7, ReplicationFactor: 3, Producers: 2, Consumers: 5,
		MessageBytes: 333, BatchBytes: 12345, Linger: -time.Nanosecond, Acks: "primary", Sync: true,
		Messages: 99, Duration: 1500 * time.Millisecond, Rate: 1234.5, Compression: "zstd",
		Warmup: 250 * time.Millisecond, Preload: false, DrainTimeout: 3 * time.Second, Seed: 42}
	got := DefaultSpec(ModeE2E)
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	got.AddFlags(fs)
	if err := fs.Parse(want.Args()); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, want)
	}
}

func TestSharesAndPartitions(t *testing.T) {
	var sum int64
	for i := range 7 {
		sum += share(100, i, 7)
	}
	if sum != 100 || share(100, 0, 7) != 15 || share(100, 6, 7) != 14 {
		t.Fatalf("share: sum %d, first %d, last %d", sum, share(100, 0, 7), share(100, 6, 7))
	}
	if got := consumerPartitions(10, 1, 3); !reflect.DeepEqual(got, []int{1, 4, 7}) {
		t.Fatalf("consumerPartitions(10, 1, 3) = %v", got)
	}
	if got := BrokerList(" a:1, ,b:2,"); !reflect.DeepEqual(got, []string{"a:1", "b:2"}) {
		t.Fatalf("BrokerList = %v", got)
	}
}

func TestPacer(t *testing.T) {
	if p := newPacer(0); p.limited() || p.due(5, 100) != 5 {
		t.Fatal("an unlimited pacer makes everything due at the start")
	}
	p := newPacer(4000) // 250 µs apart
	for k, want := range map[int64]int64{0: 0, 1: 250_000, 4000: 1e9} {
		if got := p.due(0, k); got != want {
			t.Errorf("due(%d) = %d, want %d", k, got, want)
		}
	}
}
