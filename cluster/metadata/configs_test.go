package metadata

import (
	"errors"
	"testing"
)

// An alter_config command replaces the topic's overrides (copy on write),
// survives a snapshot, and is refused for a bad value, an unknown topic
// or a recreated one (its id fences it).
func TestAlterConfig(t *testing.T) {
	s := New()
	r, _ := apply(t, s, mustPlanCreate(t, s, "t", 2, 1))
	old := r.Topic
	c, err := s.PlanAlterConfig("t", old.ID, TopicConfig{RetentionMs: 60000, RetentionBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := apply(t, s, c)
	if err != nil {
		t.Fatal(err)
	}
	if want := (TopicConfig{RetentionMs: 60000, RetentionBytes: -1}); r2.Topic.Config != want || s.Topic("t").Config != want {
		t.Fatalf("config %+v, stored %+v; want %+v", r2.Topic.Config, s.Topic("t").Config, want)
	}
	if old.Config != (TopicConfig{}) {
		t.Fatal("the old topic value was modified in place")
	}
	s2, err := Restore(s.Snapshot())
	if err != nil || s2.Topic("t").Config != r2.Topic.Config {
		t.Fatalf("after a snapshot: %+v, %v", s2.Topic("t"), err)
	}
	for _, tc := range []struct {
		name string
		cmd  Command
		want error
	}{
		{"negative retention", Command{Version: 1, Op: OpAlterConfig, Name: "t", Config: &TopicConfig{RetentionMs: -2}}, ErrInvalidConfig},
		{"no config", Command{Version: 1, Op: OpAlterConfig, Name: "t"}, ErrInvalidCommand},
		{"unknown topic", Command{Version: 1, Op: OpAlterConfig, Name: "u", Config: &TopicConfig{}}, ErrUnknownTopic},
		{"another id", Command{Version: 1, Op: OpAlterConfig, Name: "t", ID: TopicID{1}, Config: &TopicConfig{}}, ErrUnknownTopic},
	} {
		if _, err := apply(t, s, tc.cmd); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := s.PlanAlterConfig("t", old.ID, TopicConfig{RetentionBytes: -5}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("plan with a bad value: %v", err)
	}
	if s.Topic("t").Config != r2.Topic.Config {
		t.Fatal("a refused command changed the config")
	}
}
