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
// offsets, end offsets and lag over the native protocol; reset-offsets
// moves an inactive group's offsets (and refuses an active one's), and
// delete deletes it; a node without a Kafka listener serves them too.
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

	// An active group's offsets are not reset.
	if code, _, errs := s.cli("", "group", "reset-offsets", "app", "--topic", "gl", "--to-earliest"); code == 0 || !strings.Contains(errs, "inactive") {
		t.Fatalf("reset of an active group: exit %d, %q", code, errs)
	}
	cons.Close() // leaves the group
	committed := func() map[int32]int64 {
		var d groupDescJSON
		if err := json.Unmarshal([]byte(s.cliOK("", "--json", "group", "describe", "app")), &d); err != nil {
			t.Fatal(err)
		}
		out := map[int32]int64{}
		for _, p := range d.Partitions {
			out[p.Partition] = p.Committed
		}
		if len(d.Members) != 0 {
			return nil
		}
		return out
	}
	deadline := time.Now().Add(30 * time.Second)
	before := committed()
	for before == nil {
		if time.Now().After(deadline) {
			t.Fatal("the group still has members 30 s after its consumer closed")
		}
		time.Sleep(50 * time.Millisecond) // polling the CLI, not synchronisation
		before = committed()
	}
	var plan []resetJSON
	if err := json.Unmarshal([]byte(s.cliOK("", "--json", "group", "reset-offsets", "app", "--topic", "gl", "--to-earliest", "--dry-run")), &plan); err != nil {
		t.Fatal(err)
	}
	if len(plan) != 2 || plan[0].New != 0 || plan[1].New != 0 || plan[0].Current != before[0] {
		t.Fatalf("dry run plan %+v (committed %v)", plan, before)
	}
	if after := committed(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a dry run committed: %v, was %v", after, before)
	}
	for _, tc := range []struct {
		args []string
		want func(p int32) int64
	}{
		{[]string{"--to-offset", "2"}, func(int32) int64 { return 2 }},
		{[]string{"--to-offset", "1000"}, func(p int32) int64 { return desc.Partitions[p].End }},
		{[]string{"--to-datetime", "2000-01-01T00:00:00"}, func(int32) int64 { return 0 }},
		{[]string{"--to-latest"}, func(p int32) int64 { return desc.Partitions[p].End }},
	} {
		out := s.cliOK("", append([]string{"group", "reset-offsets", "app", "--topic", "gl"}, tc.args...)...)
		if !strings.Contains(out, "NEW") {
			t.Fatalf("reset %v: %q", tc.args, out)
		}
		got := committed()
		for p := int32(0); p < 2; p++ {
			if got[p] != tc.want(p) {
				t.Fatalf("after reset %v: committed %v", tc.args, got)
			}
		}
	}
	if code, _, errs := s.cli("", "group", "reset-offsets", "app", "--topic", "gl"); code == 0 || !strings.Contains(errs, "exactly one") {
		t.Fatalf("reset without a target: exit %d, %q", code, errs)
	}

	if out := s.cliOK("", "group", "delete", "app"); !strings.Contains(out, "deleted") {
		t.Fatalf("group delete: %q", out)
	}
	if code, _, errs := s.cli("", "group", "describe", "app"); code == 0 || !strings.Contains(errs, "does not exist") {
		t.Fatalf("describe a deleted group: exit %d, %q", code, errs)
	}

	plain := startServer(t, serverOpts{})
	if out := plain.cliOK("", "group", "list"); !strings.Contains(out, "GROUP") {
		t.Fatalf("group list without a Kafka listener: %q", out)
	}
}
