package metadata

import "fmt"

// OpAlterConfig replaces a topic's config overrides (Command.Name, ID and
// Config: the whole new TopicConfig, zero fields meaning the node's
// default). Every node applies it to the topic's replicas it hosts at
// run time: the next retention pass uses the new bounds.
const OpAlterConfig Op = "alter_config"

// Check reports ErrInvalidConfig for a value outside its range: retention
// is -1 (unlimited), 0 (the node's default) or positive; the cleanup
// policy one of Kafka's; the compaction knobs not negative; the segment
// configs 0 or within their bounds (TopicSegmentBytesMin...).
func (c TopicConfig) Check() error {
	if c.RetentionMs < -1 || c.RetentionBytes < -1 {
		return fmt.Errorf("%w: retention must be -1 (unlimited), 0 (node default) or positive", ErrInvalidConfig)
	}
	switch c.CleanupPolicy {
	case "", CleanupDelete, CleanupCompact, CleanupCompactDelete:
	default:
		return fmt.Errorf("%w: cleanup policy %q: give delete, compact or compact,delete", ErrInvalidConfig, c.CleanupPolicy)
	}
	if c.MinCleanableDirtyRatio < 0 || c.MinCleanableDirtyRatio > 1 || c.DeleteRetentionMs < 0 || c.MinCompactionLagMs < 0 || c.MaxCompactionLagMs < 0 {
		return fmt.Errorf("%w: min cleanable dirty ratio must be in [0, 1], delete retention and the compaction lags 0 or more", ErrInvalidConfig)
	}
	if c.MaxCompactionLagMs != 0 && c.MaxCompactionLagMs < c.MinCompactionLagMs {
		return fmt.Errorf("%w: max compaction lag %d ms is below the min compaction lag %d ms", ErrInvalidConfig, c.MaxCompactionLagMs, c.MinCompactionLagMs)
	}
	if b := c.SegmentBytes; b != 0 && (b < TopicSegmentBytesMin || b > TopicSegmentBytesMax) {
		return fmt.Errorf("%w: segment bytes %d: 0 (node default) or %d..%d", ErrInvalidConfig, b, TopicSegmentBytesMin, TopicSegmentBytesMax)
	}
	if ms := c.SegmentMs; ms < 0 || ms > TopicSegmentMsMax {
		return fmt.Errorf("%w: segment ms %d: 0 (node default) or 1..%d", ErrInvalidConfig, ms, int64(TopicSegmentMsMax))
	}
	return nil
}

// PlanAlterConfig returns the command that gives topic name (with id,
// when not zero) the config overrides cfg.
func (s *State) PlanAlterConfig(name string, id TopicID, cfg TopicConfig) (Command, error) {
	t, err := s.lookup(name, id)
	if err != nil {
		return Command{}, err
	}
	if err := cfg.Check(); err != nil {
		return Command{}, err
	}
	return Command{Version: CommandVersion, Op: OpAlterConfig, Name: name, ID: t.ID, Config: &cfg}, nil
}

func (s *State) applyAlterConfig(c Command) (Result, error) {
	t, err := s.lookup(c.Name, c.ID)
	if err != nil {
		return Result{}, err
	}
	if c.Config == nil {
		return Result{}, fmt.Errorf("%w: alter_config without a config", ErrInvalidCommand)
	}
	if err := c.Config.Check(); err != nil {
		return Result{}, err
	}
	// Copy on write: readers may hold the old *Topic.
	cp := *t
	cp.Config = *c.Config
	s.topics[cp.Name] = &cp
	s.byID[cp.ID] = &cp
	return Result{Topic: &cp}, nil
}
