package metadata

import "fmt"

// OpDeleteRecords moves the log start of one partition (Command.Name, ID,
// Partition) up to Command.Offset: the records below it are deleted for
// every reader, as Kafka's DeleteRecords deletes them. The metadata
// holds it, not the partition's own log, so that every replica, a
// replica that restarts and one added later by a move all read the same
// start from one place, and retention may drop the segments below it
// without losing the fact. A start never moves down: a command at or
// below the partition's current start changes nothing.
const OpDeleteRecords Op = "delete_records"

// LogStart is partition p's log start set by DeleteRecords (0: none).
func (t *Topic) LogStart(p int32) int64 {
	if p < 0 || int(p) >= len(t.LogStarts) {
		return 0
	}
	return t.LogStarts[p]
}

// PlanDeleteRecords returns the command that moves the log start of
// partition p of topic name (with id, when not zero) to offset.
func (s *State) PlanDeleteRecords(name string, id TopicID, p int32, offset int64) (Command, error) {
	t, err := s.lookup(name, id)
	if err != nil {
		return Command{}, err
	}
	c := Command{Version: CommandVersion, Op: OpDeleteRecords, Name: name, ID: t.ID, Partition: p, Offset: offset}
	return c, checkDeleteRecords(t, c)
}

func checkDeleteRecords(t *Topic, c Command) error {
	if c.Partition < 0 || int(c.Partition) >= len(t.Replicas) {
		return fmt.Errorf("%w: %s has no partition %d", ErrUnknownTopic, t.Name, c.Partition)
	}
	if c.Offset < 0 {
		return fmt.Errorf("%w: delete_records to offset %d", ErrInvalidCommand, c.Offset)
	}
	return nil
}

func (s *State) applyDeleteRecords(c Command) (Result, error) {
	t, err := s.lookup(c.Name, c.ID)
	if err != nil {
		return Result{}, err
	}
	if err := checkDeleteRecords(t, c); err != nil {
		return Result{}, err
	}
	if c.Offset <= t.LogStart(c.Partition) {
		return Result{Topic: t}, nil
	}
	// Copy on write: readers may hold the old *Topic and its slice.
	cp := *t
	cp.LogStarts = make([]int64, len(t.Replicas))
	copy(cp.LogStarts, t.LogStarts)
	cp.LogStarts[c.Partition] = c.Offset
	s.topics[cp.Name] = &cp
	s.byID[cp.ID] = &cp
	return Result{Topic: &cp}, nil
}
