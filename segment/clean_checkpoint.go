package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"

	"github.com/corestream/corestream/segment/checkpoint"
)

// The cleaner's checkpoint (Kafka's cleaner-offset-checkpoint): the raft
// offset below which a cleaning pass has covered the log, so that a
// reopened log is dirty only above it and does not clean again what it
// cleaned before. Written when a pass ends; when a truncation or a reset
// moves the log end below it, rewritten (or removed) before the log
// appends again, so that it never claims records written after it.
//
// Payload version 1: cleanedTo int64.
var cleanerKind = checkpoint.Kind{'C', 'L', 'N', 'R'}

const cleanerFile = "cleaner-offset.checkpoint"

// persistCleaned writes the cleaner's checkpoint for l.cleanedTo, or
// removes it when there is nothing cleaned.
func (l *Log) persistCleaned() error {
	if l.cleanedTo <= l.logStart {
		err := l.fs.Remove(l.path(cleanerFile))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("segment: removing the cleaner checkpoint: %w", err)
		}
		return nil
	}
	return checkpoint.Write(l.fs, l.path(cleanerFile), cleanerKind, 1, binary.BigEndian.AppendUint64(nil, uint64(l.cleanedTo)))
}

// recoverCleaned loads the cleaner's checkpoint: the cleaned part is
// what it says, clamped to the recovered log (a damaged or unknown one
// leaves the log all dirty: cleaning again removes nothing new).
// REQUIRES: logStart and leo recovered.
func (l *Log) recoverCleaned() {
	v, p, err := checkpoint.Read(l.fs, l.path(cleanerFile), cleanerKind)
	if err != nil || v != 1 || len(p) != 8 {
		return
	}
	l.cleanedTo = min(int64(binary.BigEndian.Uint64(p)), l.leo)
	l.report.CleanedTo = l.cleanedTo
}
