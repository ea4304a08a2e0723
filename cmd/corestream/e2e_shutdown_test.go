package main

import (
	"syscall"
	"testing"
	"time"

	"github.com/corestream/corestream/netio/wire"
)

// A graceful stop answers a long poll at once (with what is there) rather
// than holding the consumer until its connection is cut.
func TestE2EShutdownAnswersLongPolls(t *testing.T) {
	s := startServer(t, serverOpts{})
	s.cliOK("", "topic", "create", "quiet")
	md := wire.MetadataResponse{}
	w, err := dialWire(s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer w.c.Close()
	if err := w.handshake(); err != nil {
		t.Fatal(err)
	}
	if err := w.call(&wire.MetadataRequest{Topics: []string{"quiet"}}, &md); err != nil {
		t.Fatal(err)
	}
	ref := wire.PartitionRef{Topic: "quiet", TopicID: md.Topics[0].ID, Generation: wire.GenerationUnknown}
	eventually(t, 10*time.Second, "the partition readable", func() bool {
		return w.call(&wire.ListOffsetsRequest{PartitionRef: ref, Timestamp: wire.TimestampLatest}, &wire.ListOffsetsResponse{}) == nil
	})
	// The poll, then a metadata request behind it: once the metadata is
	// answered, the broker has read the poll (frames are read in order)
	// and parked it.
	pollID, err := w.send(&wire.FetchRequest{PartitionRef: ref, FetchOffset: 0, MaxBytes: 1 << 10, MinBytes: 1, MaxWaitMs: wire.FetchWaitMsMax})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.call(&wire.MetadataRequest{}, &wire.MetadataResponse{}); err != nil {
		t.Fatalf("the request behind the poll: %v", err)
	}
	answered := make(chan error, 1)
	go func() { answered <- w.readFor(pollID, &wire.FetchResponse{}) }()
	start := time.Now()
	if code := s.stop(syscall.SIGTERM); code != 0 {
		t.Fatalf("exit %d", code)
	}
	took := time.Since(start)
	select {
	case err := <-answered:
		if err != nil {
			t.Fatalf("the long poll got %v instead of an answer", err)
		}
	case <-time.After(time.Second):
		t.Fatal("the long poll was not answered by the stop")
	}
	if took > 5*time.Second {
		t.Fatalf("the stop took %v with a long poll parked", took)
	}
}
