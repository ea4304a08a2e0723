package client

import (
	"testing"
	"time"
)

func TestGroupConfigDefaultsAndBounds(t *testing.T) {
	cc := Config{RequestTimeout: 30 * time.Second}
	g, err := GroupConfig{Group: "g"}.withDefaults(&cc)
	if err != nil || g.SessionTimeout != 10*time.Second || g.HeartbeatInterval != time.Second || g.RebalanceTimeout != 20*time.Second ||
		g.AutoCommitInterval != 5*time.Second || len(g.Assignors) != 2 || g.Start.kind != startEarliest {
		t.Fatalf("defaults: %+v %v", g, err)
	}
	short := Config{RequestTimeout: 5 * time.Second}
	if g, err := (GroupConfig{Group: "g"}).withDefaults(&short); err != nil || g.RebalanceTimeout != 5*time.Second {
		t.Fatalf("the rebalance timeout follows a shorter request timeout: %v %v", g.RebalanceTimeout, err)
	}
	for _, bad := range []GroupConfig{
		{},
		{Group: "bad/name"},
		{Group: "g", SessionTimeout: 500 * time.Millisecond},
		{Group: "g", SessionTimeout: 2 * time.Second, HeartbeatInterval: 2 * time.Second},
		{Group: "g", RebalanceTimeout: time.Minute},
		{Group: "g", Assignors: []string{"sticky"}},
		{Group: "g", Start: StartAt(5)},
		{Group: "g", Consumer: ConsumerConfig{Name: "other"}},
	} {
		if _, err := bad.withDefaults(&cc); err == nil {
			t.Errorf("%+v was accepted", bad)
		}
	}
}
