package node

import (
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
)

// deleteOffsets drops consumer's committed offsets of parts, or every
// one of them when parts is empty, through the metadata group (where
// the named-consumer offsets, a group's among them, are stored today).
func (c *controller) deleteOffsets(consumer string, parts []service.TopicPartition, done func(struct{}, error)) {
	if len(parts) > metadata.OffsetsPerCommitMax {
		done(struct{}{}, service.Errorf(service.ErrInvalidRequest, "a delete of %d offsets; at most %d at once", len(parts), metadata.OffsetsPerCommitMax))
		return
	}
	cmd := metadata.Command{Version: metadata.CommandVersion, Op: metadata.OpDeleteOffsets, Consumer: consumer}
	for _, p := range parts {
		cmd.Offsets = append(cmd.Offsets, metadata.OffsetEntry{OffsetKey: metadata.OffsetKey{Topic: p.Topic, Partition: p.Partition}})
	}
	c.propose(cmd, adminTimeoutDefault, func(_ metadata.Result, err error) {
		if err != nil {
			done(struct{}{}, metaKindErr(err))
			return
		}
		done(struct{}{}, nil)
	})
}
