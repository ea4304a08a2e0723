package main

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"
)

// consoleGroupRowsJS reads the groups view: each group with its lag
// cell and members cell.
const consoleGroupRowsJS = `Array.from(document.querySelectorAll('#groups tbody tr')).map(r => ({
	group: r.dataset.group, lag: r.cells[4].textContent, members: r.cells[2].textContent}))`

// consoleGroupPartitionsJS reads the partitions of the group opened.
const consoleGroupPartitionsJS = `Array.from(document.querySelectorAll('#group-partitions tbody tr')).map(r => ({
	topic: r.dataset.topic, partition: +r.dataset.partition, member: r.cells[2].textContent, committed: r.cells[3].textContent,
	end: r.cells[4].textContent, lag: r.cells[5].textContent, trend: r.cells[6].textContent}))`

// consoleGroupMembersJS reads the members of the group opened, each with
// its assignment as the page writes it.
const consoleGroupMembersJS = `Array.from(document.querySelectorAll('#group-member-list tbody tr')).map(r => ({
	id: r.dataset.member, client: r.cells[1].textContent, assignment: r.cells[3].textContent}))`

type consoleGroupRow struct {
	Group   string `json:"group"`
	Lag     string `json:"lag"`
	Members string `json:"members"`
}

type consoleGroupPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Member    string `json:"member"`
	Committed string `json:"committed"`
	End       string `json:"end"`
	Lag       string `json:"lag"`
	Trend     string `json:"trend"`
}

type consoleGroupMember struct {
	ID         string `json:"id"`
	Client     string `json:"client"`
	Assignment string `json:"assignment"`
}

// checkConsoleGroups: a Kafka consumer group reads part of topic (which
// holds records in each of its partitions and takes none meanwhile) and
// commits; the console's
// groups view shows the group with its member and the total lag `group
// describe --json` gives, and, opened, every partition's committed
// offset, end and lag as the CLI gives them.
func checkConsoleGroups(t *testing.T, c *e2eCluster, bctx context.Context, topic string, partitions int) {
	t.Helper()
	var addrs []string
	for _, n := range c.plan.Nodes {
		addrs = append(addrs, n.KafkaAddr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cons, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumerGroup("console-app"), kgo.ConsumeTopics(topic),
		kgo.ClientID("console-reader"), kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.HeartbeatInterval(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	// Read until every partition gave a record, and commit each
	// partition's first: every partition has a commit and a lag (a
	// partition without a commit has no lag, on the page as in the CLI).
	first := map[int32]*kgo.Record{}
	for len(first) < partitions {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("the group read %d of %d partitions: %v", len(first), partitions, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			if first[r.Partition] == nil {
				first[r.Partition] = r
			}
		})
	}
	var commit []*kgo.Record
	for _, r := range first {
		commit = append(commit, r)
	}
	if err := cons.CommitRecords(ctx, commit...); err != nil {
		t.Fatal(err)
	}
	var desc groupDescJSON
	if err := json.Unmarshal([]byte(c.cliOK("", "--json", "group", "describe", "console-app")), &desc); err != nil {
		t.Fatal(err)
	}
	if desc.TotalLag <= 0 || len(desc.Partitions) == 0 {
		t.Fatalf("group describe --json after a record of each partition was committed: %+v", desc)
	}
	var rows []consoleGroupRow
	defer func() {
		if t.Failed() {
			t.Logf("group describe --json: %+v\nthe page's groups: %+v", desc, rows)
		}
	}()
	eventually(t, 20*time.Second, "the console's group to show the CLI's lag and its member", func() bool {
		rows = evalIn[[]consoleGroupRow](t, bctx, consoleGroupRowsJS)
		for _, r := range rows {
			if r.Group == "console-app" {
				return r.Lag == itoa(desc.TotalLag) && r.Members == "1"
			}
		}
		return false
	})
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`#groups tr[data-group="console-app"]`))); err != nil {
		t.Fatal(err)
	}
	var shown []consoleGroupPartition
	eventually(t, 20*time.Second, "the group's partitions as group describe --json gives them", func() bool {
		shown = evalIn[[]consoleGroupPartition](t, bctx, consoleGroupPartitionsJS)
		byKey := map[[2]any]consoleGroupPartition{}
		for _, p := range shown {
			byKey[[2]any{p.Topic, p.Partition}] = p
		}
		committed := 0
		for _, p := range desc.Partitions {
			if p.Committed < 0 {
				continue // nothing committed there: the page lists commits only
			}
			committed++
			s, ok := byKey[[2]any{p.Topic, p.Partition}]
			if !ok || s.Committed != itoa(p.Committed) || s.End != itoa(p.End) || s.Lag != itoa(p.Lag) {
				return false
			}
			// The assignment: the one member, by its client id, holds
			// every partition the CLI shows assigned.
			if p.Member != "" && s.Member != "console-reader" {
				return false
			}
		}
		return committed == len(shown)
	})
	// The member list: one member, the CLI's, whose assignment names
	// every partition of the topic.
	var members []consoleGroupMember
	eventually(t, 10*time.Second, "the group's member and its assignment", func() bool {
		members = evalIn[[]consoleGroupMember](t, bctx, consoleGroupMembersJS)
		if len(members) != 1 || len(desc.Members) != 1 || members[0].ID != desc.Members[0].ID || members[0].Client != "console-reader" {
			return false
		}
		all := make([]string, partitions)
		for p := range partitions {
			all[p] = strconv.Itoa(p)
		}
		return members[0].Assignment == topic+" "+strings.Join(all, ",")
	})
	t.Logf("groups view: console-app lag %d over %d partitions, as group describe --json; member %+v", desc.TotalLag, len(shown), members)
}

func itoa(v int64) string {
	b, _ := json.Marshal(v)
	return string(b)
}
