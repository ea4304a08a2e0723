package controller

import (
	"errors"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/shard/partition"
)

// metadataKinds maps the metadata state machine's errors onto the
// service's kinds.
var metadataKinds = []struct{ is, kind error }{
	{metadata.ErrTopicExists, service.ErrTopicExists},
	{metadata.ErrUnknownTopic, service.ErrUnknownTopicOrPartition},
	{metadata.ErrInvalidPartitions, service.ErrInvalidPartitions},
	{metadata.ErrInvalidReplication, service.ErrInvalidReplicationFactor},
	{metadata.ErrInvalidTopicName, service.ErrInvalidTopicName},
	{metadata.ErrInvalidConfig, service.ErrInvalidConfig},
	{metadata.ErrInvalidAssignment, service.ErrInvalidReplicaAssignment},
	{metadata.ErrRosterNotSeeded, service.ErrMetadataNotReady},
}

// MetaKindErr gives a metadata error its service kind (INVALID_REQUEST
// when it has none); an error that already has one passes.
func MetaKindErr(err error) error {
	var se *service.Error
	var pe *partition.Error
	if errors.As(err, &se) || errors.As(err, &pe) {
		return err
	}
	for _, m := range metadataKinds {
		if errors.Is(err, m.is) {
			return service.Errorf(m.kind, "%v", err)
		}
	}
	return service.Errorf(service.ErrInvalidRequest, "%v", err)
}
