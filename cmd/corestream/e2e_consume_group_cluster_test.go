package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// On three nodes, a group that `consume --group --count` consumed and
// left committed what it printed (it once committed nothing when it
// stopped while still taking its assignment) and shows one lag everywhere: `group describe`, GET /v1/groups/G asked of every
// node (the one not coordinating forwards), and the coordinator's
// /metrics, over partitions whose primaries are spread over the nodes,
// not all on the coordinator's.
func TestE2EConsumeGroupCluster(t *testing.T) {
	c := startCluster(t, clusterOpts{nodes: 3, http: true})
	c.cliOK("", "topic", "create", "spread", "--partitions", "6", "--replication-factor", "1")
	var in strings.Builder
	for i := range 300 {
		fmt.Fprintf(&in, "k%d\tv%d\n", i, i)
	}
	c.cliOK(in.String(), "produce", "spread", "--key-separator", "\t")
	if out := c.cliOK("", "consume", "spread", "--group", "spread-readers", "--count", "200", "-f", `%o\n`); strings.Count(out, "\n") != 200 {
		t.Fatalf("consume --count 200 printed %d lines", strings.Count(out, "\n"))
	}
	var desc groupDescJSON
	if err := json.Unmarshal([]byte(c.cliOK("", "--json", "group", "describe", "spread-readers")), &desc); err != nil {
		t.Fatal(err)
	}
	// What the member committed as it left: the 200 records it printed,
	// over the partitions it had taken by then (a partition it had not
	// started to read has no committed offset, and no lag, as in Kafka).
	described := int64(0)
	for _, p := range desc.Partitions {
		if p.Committed >= 0 {
			described += p.Committed
		}
	}
	if len(desc.Members) != 0 || described != 200 {
		t.Fatalf("group describe after 200 of 300: %+v; want no member, 200 committed", desc)
	}
	lag := desc.TotalLag
	type detail struct {
		CoordinatorID int32 `json:"coordinator_id"`
		Lag           int64 `json:"lag"`
		Partitions    []struct {
			Committed int64  `json:"committed"`
			Lag       *int64 `json:"lag"`
		} `json:"partitions"`
	}
	var coord int32
	for _, n := range c.plan.Nodes {
		var d detail
		if err := json.Unmarshal(httpGet(t, "http://"+n.HTTPAddr+"/v1/groups/spread-readers"), &d); err != nil {
			t.Fatal(err)
		}
		committed := int64(0)
		for _, p := range d.Partitions {
			committed += p.Committed
			if p.Lag == nil {
				t.Fatalf("node %d: GET /v1/groups/spread-readers: a partition without lag: %+v", n.ID, d)
			}
		}
		if d.Lag != lag || committed != 200 || len(d.Partitions) != len(desc.Partitions) {
			t.Fatalf("node %d: GET /v1/groups/spread-readers: lag %d, %d committed over %d partitions; group describe: lag %d, 200 over %d",
				n.ID, d.Lag, committed, len(d.Partitions), lag, len(desc.Partitions))
		}
		coord = d.CoordinatorID
	}
	for _, n := range c.plan.Nodes {
		if int32(n.ID) != coord {
			continue
		}
		waitUntil(t, 20*time.Second, "the group's lag in the coordinator's /metrics", func() (bool, string) {
			v := metricValue(string(httpGet(t, "http://"+n.HTTPAddr+"/metrics")), `corestream_group_lag_records{group="spread-readers"}`)
			return v == float64(lag), fmt.Sprintf("node %d: corestream_group_lag_records = %v, want %d", n.ID, v, lag)
		})
	}
}
