package kafka

import (
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio"
)

// The reassignment APIs (KIP-455) on the cluster's replica moves
// (`corestream partition reassign`, docs/operations.md): a move adds the
// new replicas, catches them up, hands the primary over when it must,
// then drops the old ones, one consensus change at a time. Both need
// the cluster permission (Kafka's ALTER and DESCRIBE on the cluster),
// and run on the metadata primary (Kafka's controller: NOT_CONTROLLER
// elsewhere, and the client asks again). Versions 0, as Kafka 3.9 (v1 of
// AlterPartitionReassignments adds KIP-1112's factor changes, which a
// move never makes).
const (
	alterPartitionAssignmentsKey  int16 = 45
	listPartitionReassignmentsKey int16 = 46
)

// reassignReplicas is a move's replica sets as Kafka lists them: every
// replica the partition has during the move (target first), those being
// added and those being removed. A cancelled move returning to from
// removes what it had added.
func reassignReplicas(m service.ReassignStatus) (replicas, adding, removing []int32) {
	to, from := m.Target, m.From
	if m.Cancelled {
		to, from = m.From, m.Target
	}
	replicas = slices.Clone(to)
	for _, n := range from {
		if !slices.Contains(to, n) {
			replicas = append(replicas, n)
			removing = append(removing, n)
		}
	}
	for _, n := range to {
		if !slices.Contains(from, n) {
			adding = append(adding, n)
		}
	}
	return replicas, adding, removing
}

// listPartitionReassignments lists the moves in progress: every one
// (topics null), or those of the partitions named (a partition not
// moving, or unknown, is left out, as Kafka leaves it out).
func (l *Listener) listPartitionReassignments(c *netio.Conn, req *kmsg.ListPartitionReassignmentsRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	if code, msg := l.clusterAllowed(); code != 0 {
		resp.ErrorCode, resp.ErrorMessage = code, msg
		reply(resp)
		return
	}
	var want map[string][]int32
	if req.Topics != nil {
		want = make(map[string][]int32, len(req.Topics))
		for _, t := range req.Topics {
			want[t.Topic] = append(want[t.Topic], t.Partitions...)
		}
	}
	l.svc.Reassign(c.Shard(), &service.ReassignRequest{Action: service.ReassignList}, func(res service.ReassignResult, err error) {
		if err != nil {
			resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
			if errors.Is(err, service.ErrAuthorization) {
				resp.ErrorCode, resp.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, clusterDenied(err)
			}
			reply(resp)
			return
		}
		moves := slices.Clone(res.Moves)
		slices.SortFunc(moves, func(a, b service.ReassignStatus) int {
			if a.Topic != b.Topic {
				if a.Topic < b.Topic {
					return -1
				}
				return 1
			}
			return int(a.Partition - b.Partition)
		})
		for _, m := range moves {
			if want != nil && !slices.Contains(want[m.Topic], m.Partition) {
				continue
			}
			if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != m.Topic {
				t := kmsg.NewListPartitionReassignmentsResponseTopic()
				t.Topic = m.Topic
				resp.Topics = append(resp.Topics, t)
			}
			p := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
			p.Partition = m.Partition
			p.Replicas, p.AddingReplicas, p.RemovingReplicas = reassignReplicas(m)
			t := &resp.Topics[len(resp.Topics)-1]
			t.Partitions = append(t.Partitions, p)
		}
		reply(resp)
	})
}

// alterPartitionAssignments starts a move to each partition's replicas,
// or cancels its move (replicas null), answered per partition as Kafka's
// controller answers: an unknown topic or partition
// UNKNOWN_TOPIC_OR_PARTITION, a cancel of a partition not moving
// NO_REASSIGNMENT_IN_PROGRESS, an empty list, a node twice or outside the
// roster INVALID_REPLICA_ASSIGNMENT, the partition's current replicas
// nothing to do (no error). Where corestream's moves differ from Kafka's:
// a list of another length than the topic's factor is
// INVALID_REPLICA_ASSIGNMENT (a topic's factor is fixed), and a new
// target for a partition already moving is REASSIGNMENT_IN_PROGRESS
// (cancel the move first; Kafka replaces its target).
func (l *Listener) alterPartitionAssignments(c *netio.Conn, req *kmsg.AlterPartitionAssignmentsRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	if code, msg := l.clusterAllowed(); code != 0 {
		resp.ErrorCode, resp.ErrorMessage = code, msg
		reply(resp)
		return
	}
	ask := service.MetadataRequest{}
	for _, t := range req.Topics {
		if !slices.Contains(ask.Topics, t.Topic) {
			ask.Topics = append(ask.Topics, t.Topic)
		}
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition = p.Partition
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if len(ask.Topics) == 0 {
		reply(resp)
		return
	}
	md, err := l.svc.Metadata(ask)
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
		reply(resp)
		return
	}
	routes := make(map[string]*service.TopicMetadata, len(md.Topics))
	for i := range md.Topics {
		routes[md.Topics[i].Name] = &md.Topics[i]
	}
	l.svc.Reassign(c.Shard(), &service.ReassignRequest{Action: service.ReassignList}, func(res service.ReassignResult, err error) {
		if err != nil {
			resp.ErrorCode, resp.ErrorMessage = errorCode(err), errorMessage(err)
			if errors.Is(err, service.ErrAuthorization) {
				resp.ErrorCode, resp.ErrorMessage = kerr.ClusterAuthorizationFailed.Code, clusterDenied(err)
			}
			reply(resp)
			return
		}
		moving := make(map[string]map[int32]service.ReassignStatus)
		for _, m := range res.Moves {
			if moving[m.Topic] == nil {
				moving[m.Topic] = make(map[int32]service.ReassignStatus)
			}
			moving[m.Topic][m.Partition] = m
		}
		pending := 1
		finish := func() {
			if pending--; pending == 0 {
				reply(resp)
			}
		}
		for ti, t := range req.Topics {
			for pi, p := range t.Partitions {
				rp := &resp.Topics[ti].Partitions[pi]
				sreq, code, msg := assignmentVerdict(t.Topic, p, routes[t.Topic], moving[t.Topic])
				if sreq == nil {
					if code != 0 {
						rp.ErrorCode, rp.ErrorMessage = code, kmsg.StringPtr(msg)
					}
					continue
				}
				pending++
				l.svc.Reassign(c.Shard(), sreq, func(_ service.ReassignResult, err error) {
					rp.ErrorCode, rp.ErrorMessage = errorCode(err), errorMessage(err)
					switch {
					case errors.Is(err, service.ErrAuthorization):
						rp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
					case errors.Is(err, service.ErrInvalidRequest):
						// The move's own checks: a node twice, or
						// outside the roster.
						rp.ErrorCode = kerr.InvalidReplicaAssignment.Code
					}
					finish()
				})
			}
		}
		finish()
	})
}

// assignmentVerdict is what an alter asks of partition p of topic (tm
// its routes, nil when unknown; moving the topic's moves in progress):
// the move to start or cancel, or none, with the code and message
// refusing it (0: nothing to do).
func assignmentVerdict(topic string, p kmsg.AlterPartitionAssignmentsRequestTopicPartition, tm *service.TopicMetadata,
	moving map[int32]service.ReassignStatus) (*service.ReassignRequest, int16, string) {
	if tm == nil || tm.Err != nil || p.Partition < 0 || int(p.Partition) >= len(tm.Partitions) {
		return nil, kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("%s has no partition %d", topic, p.Partition)
	}
	mv, isMoving := moving[p.Partition]
	sreq := &service.ReassignRequest{Action: service.ReassignStart, Moves: []service.ReassignMove{{Topic: topic, Partition: p.Partition, Replicas: p.Replicas}}}
	switch cur := tm.Partitions[p.Partition].Replicas; {
	case p.Replicas == nil && !isMoving:
		return nil, kerr.NoReassignmentInProgress.Code, fmt.Sprintf("%s/%d is not being reassigned", topic, p.Partition)
	case p.Replicas == nil:
		sreq.Action = service.ReassignCancel
	case len(p.Replicas) == 0:
		return nil, kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("the assignment of %s/%d is an empty replica list", topic, p.Partition)
	case isMoving:
		return nil, kerr.ReassignmentInProgress.Code, fmt.Sprintf("%s/%d is moving from %v to %v; cancel that move first (null replicas), then reassign", topic, p.Partition, mv.From, mv.Target)
	case len(p.Replicas) != int(tm.ReplicationFactor):
		return nil, kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("%s/%d: %d replicas given, the topic's replication factor is %d, which a reassignment does not change", topic, p.Partition, len(p.Replicas), tm.ReplicationFactor)
	case slices.Equal(p.Replicas, cur):
		return nil, 0, "" // Kafka: nothing to do, no error
	}
	return sreq, 0, ""
}
