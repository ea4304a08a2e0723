package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// group list and describe show a franz-go group's members, committed
// offsets, end offsets and lag, found through the server's Kafka
// listener; without one they say why.
func TestE2EGroupCommands(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	kaddr := l.Addr().String()
	l.Close()
	s := startServer(t, serverOpts{kafkaAddr: kaddr})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	newClient := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(kaddr), kgo.FetchMaxWait(200 * time.Millisecond)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	adm := kadm.NewClient(newClient())
	if res, err := adm.CreateTopic(ctx, 2, 1, nil, "gl"); err != nil || res.Err != nil {
		t.Fatalf("create: %v %v", err, res.Err)
	}
	pr := newClient(kgo.DefaultProduceTopic("gl"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	for i := 0; i < 10; i++ {
		if err := pr.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	// A member consumes 6 records and commits them: 4 are left.
	cons := newClient(kgo.ConsumerGroup("app"), kgo.ConsumeTopics("gl"), kgo.ClientID("reader"), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.HeartbeatInterval(200*time.Millisecond))
	var got []*kgo.Record
	for len(got) < 6 {
		fs := cons.PollRecords(ctx, 6-len(got))
		if ctx.Err() != nil {
			t.Fatalf("consumed %d: %v", len(got), ctx.Err())
		}
		got = append(got, fs.Records()...)
	}
	if err := cons.CommitRecords(ctx, got...); err != nil {
		t.Fatal(err)
	}

	out := s.cliOK("", "group", "list")
	if !strings.Contains(out, "GROUP") || !strings.Contains(out, "app") || !strings.Contains(out, "Stable") {
		t.Fatalf("group list: %q", out)
	}
	var desc groupDescJSON
	if err := json.Unmarshal([]byte(s.cliOK("", "--json", "group", "describe", "app")), &desc); err != nil {
		t.Fatal(err)
	}
	if desc.State != "Stable" || len(desc.Members) != 1 || desc.Members[0].ClientID != "reader" || len(desc.Partitions) != 2 || desc.TotalLag != 4 {
		t.Fatalf("group describe --json: %+v", desc)
	}
	for _, p := range desc.Partitions {
		if p.End < 5 || p.Lag != p.End-p.Committed || p.Member != desc.Members[0].ID {
			t.Fatalf("partition %+v", p)
		}
	}
	if out := s.cliOK("", "group", "describe", "app"); !strings.Contains(out, "total lag 4") || !strings.Contains(out, "LAG") {
		t.Fatalf("group describe: %q", out)
	}

	plain := startServer(t, serverOpts{})
	if code, _, errs := plain.cli("", "group", "list"); code == 0 || !strings.Contains(errs, "Kafka listener") {
		t.Fatalf("group list without a Kafka listener: exit %d, %q", code, errs)
	}
}
