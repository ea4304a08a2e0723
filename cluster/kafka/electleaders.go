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

// electLeadersKey is ElectLeaders (KIP-460), versions 0-2 as Kafka 3.9
// serves them (v0 is preferred elections only and has no top-level code).
const electLeadersKey int16 = 43

// Kafka's election types.
const (
	electionPreferred int8 = 0
	electionUnclean   int8 = 1
)

// electLeaders moves each partition's primary to its preferred replica
// (the first) by leadership transfer, as the balancer does, one partition
// at a time (a node runs one primary move at once). As Kafka's
// controller: the cluster permission (Kafka's ALTER on the cluster) is
// needed; a partition already led by its preferred replica is
// ELECTION_NOT_NEEDED (left out when every partition was asked for, null
// topics); one whose preferred replica is down or not in sync
// PREFERRED_LEADER_NOT_AVAILABLE; an unknown topic or partition
// UNKNOWN_TOPIC_OR_PARTITION. UNCLEAN elections are never made: consensus
// elects a primary only from a majority of the replicas, so a partition
// with a primary is ELECTION_NOT_NEEDED (Kafka's answer too) and one
// without is ELIGIBLE_LEADERS_NOT_AVAILABLE.
func (l *Listener) electLeaders(c *netio.Conn, req *kmsg.ElectLeadersRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	all := req.Topics == nil
	result := func(topic string, p int32, code int16, msg string) {
		if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != topic {
			t := kmsg.NewElectLeadersResponseTopic()
			t.Topic = topic
			resp.Topics = append(resp.Topics, t)
		}
		rp := kmsg.NewElectLeadersResponseTopicPartition()
		rp.Partition, rp.ErrorCode = p, code
		if msg != "" {
			rp.ErrorMessage = kmsg.StringPtr(msg)
		}
		t := &resp.Topics[len(resp.Topics)-1]
		t.Partitions = append(t.Partitions, rp)
	}
	// everyNamed answers every partition named with code (v0 has no
	// top-level code), and sets the top-level one.
	everyNamed := func(code int16, msg string) {
		resp.ErrorCode = code
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				result(t.Topic, p, code, msg)
			}
		}
		reply(resp)
	}
	if code, msg := l.clusterAllowed(); code != 0 {
		everyNamed(code, *msg)
		return
	}
	if req.ElectionType != electionPreferred && req.ElectionType != electionUnclean {
		everyNamed(kerr.InvalidRequest.Code, fmt.Sprintf("election type %d is neither PREFERRED (0) nor UNCLEAN (1)", req.ElectionType))
		return
	}
	ask := service.MetadataRequest{}
	for _, t := range req.Topics {
		if !slices.Contains(ask.Topics, t.Topic) {
			ask.Topics = append(ask.Topics, t.Topic)
		}
	}
	if !all && len(ask.Topics) == 0 {
		reply(resp)
		return
	}
	md, err := l.svc.Metadata(ask)
	if err != nil {
		everyNamed(errorCode(err), err.Error())
		return
	}
	routes := make(map[string]*service.TopicMetadata, len(md.Topics))
	for i := range md.Topics {
		routes[md.Topics[i].Name] = &md.Topics[i]
	}
	// A move's answer is addressed by index: resp grows meanwhile.
	type move struct {
		topic            string
		partition        int32
		target           int32
		topicAt, partsAt int
	}
	var moves []move
	// decide answers one partition, or queues its move.
	decide := func(topic string, p int32) {
		t := routes[topic]
		switch {
		case t != nil && errors.Is(t.Err, service.ErrAuthorization):
			result(topic, p, kerr.TopicAuthorizationFailed.Code, t.Err.Error())
			return
		case t == nil || t.Err != nil || p < 0 || int(p) >= len(t.Partitions):
			if !all {
				result(topic, p, kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("%s has no partition %d", topic, p))
			}
			return
		}
		r := &t.Partitions[p]
		switch {
		case req.ElectionType == electionUnclean && r.PrimaryID >= 0:
			if !all {
				result(topic, p, kerr.ElectionNotNeeded.Code, fmt.Sprintf("%s/%d has a primary, node %d", topic, p, r.PrimaryID))
			}
		case req.ElectionType == electionUnclean:
			result(topic, p, kerr.EligibleLeadersNotAvailable.Code, fmt.Sprintf(
				"%s/%d has no primary, and corestream makes no unclean election: a primary is elected by a majority of its replicas, so it returns when they are reachable", topic, p))
		case r.PrimaryID == r.PreferredPrimaryID:
			if !all {
				result(topic, p, kerr.ElectionNotNeeded.Code, fmt.Sprintf("%s/%d is led by its preferred replica, node %d", topic, p, r.PrimaryID))
			}
		case !slices.Contains(r.InSync, r.PreferredPrimaryID) || slices.Contains(r.Offline, r.PreferredPrimaryID):
			result(topic, p, kerr.PreferredLeaderNotAvailable.Code, fmt.Sprintf("%s/%d: the preferred replica, node %d, is down or not in sync (in sync: %v)", topic, p, r.PreferredPrimaryID, r.InSync))
		default:
			result(topic, p, 0, "")
			ti := len(resp.Topics) - 1
			moves = append(moves, move{topic: topic, partition: p, target: r.PreferredPrimaryID, topicAt: ti, partsAt: len(resp.Topics[ti].Partitions) - 1})
		}
	}
	if all {
		for _, t := range md.Topics {
			for i := range t.Partitions {
				decide(t.Name, int32(i))
			}
		}
	} else {
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				decide(t.Topic, p)
			}
		}
	}
	timeout := adminTimeout(req.TimeoutMillis)
	var run func(i int)
	run = func(i int) {
		if i == len(moves) {
			reply(resp)
			return
		}
		m := moves[i]
		l.svc.MovePrimary(c.Shard(), &service.MovePrimaryRequest{Topic: m.topic, Partition: m.partition, TargetNodeID: m.target, Timeout: timeout},
			func(_ service.MovePrimaryResult, err error) {
				if err != nil {
					at := &resp.Topics[m.topicAt].Partitions[m.partsAt]
					at.ErrorCode, at.ErrorMessage = errorCode(err), errorMessage(err)
					switch {
					case errors.Is(err, service.ErrAuthorization):
						at.ErrorCode = kerr.ClusterAuthorizationFailed.Code
					case errors.Is(err, service.ErrNotInSyncReplica), errors.Is(err, service.ErrNodeNotAvailable), errors.Is(err, service.ErrNotReplica):
						at.ErrorCode = kerr.PreferredLeaderNotAvailable.Code
					}
				}
				run(i + 1)
			})
	}
	run(0)
}

// clusterAllowed answers whether this view's principal holds the
// cluster permission (Kafka's ALTER and DESCRIBE on the cluster): 0, or
// the code and message refusing it. Listing users is a cluster
// operation, so the guarded user calls answer it; a listener without
// authentication allows everything.
func (l *Listener) clusterAllowed() (int16, *string) {
	if l.cfg.Auth == nil || l.users == nil {
		return 0, nil
	}
	if _, err := l.users.ListUsers(); err != nil {
		if errors.Is(err, service.ErrAuthorization) {
			return kerr.ClusterAuthorizationFailed.Code, clusterDenied(err)
		}
		return errorCode(err), errorMessage(err)
	}
	return 0, nil
}
