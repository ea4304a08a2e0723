package rafttest

import "github.com/corestream/corestream/raftlite"

// changeMembership asks the leader for one membership change drawn at
// random: add a node that is not a member as a learner (creating it when
// its slot is still empty), promote a learner, or remove a member, the
// leader itself included. raftlite refuses what its rules forbid (a change
// still pending, a learner behind, the last voter); the refusal is traced.
func (s *sim) changeMembership() {
	l := s.leader()
	if l == nil {
		return
	}
	conf := l.node.Membership()
	var outside []raftlite.NodeID
	for _, sn := range s.nodes {
		if !conf.Members().Has(sn.id) {
			outside = append(outside, sn.id)
		}
	}
	learners, voters := conf.Learners.IDs(), conf.Voters.IDs()
	var cc raftlite.ConfChange
	switch r := s.rng.IntN(10); {
	case r < 4 && len(learners) > 0:
		cc = raftlite.ConfChange{Type: raftlite.ConfPromote, Node: learners[s.rng.IntN(len(learners))]}
	case r < 7 && len(outside) > 0:
		cc = raftlite.ConfChange{Type: raftlite.ConfAddLearner, Node: outside[s.rng.IntN(len(outside))]}
	case r < 8 || len(voters) < 3:
		// Remove the leader itself, or anyone (a small group is not
		// shrunk further by a voter other than the leader).
		cc = raftlite.ConfChange{Type: raftlite.ConfRemove, Node: l.id}
		if r >= 8 && len(learners) > 0 {
			cc.Node = learners[s.rng.IntN(len(learners))]
		}
	default:
		members := conf.Members().IDs()
		cc = raftlite.ConfChange{Type: raftlite.ConfRemove, Node: members[s.rng.IntN(len(members))]}
	}
	ent, err := l.node.ProposeConfChange(cc)
	s.tracef("membership change at %d (%v): %v: %v", l.id, conf, cc, err)
	if err != nil {
		return
	}
	s.res.ConfChanges++
	if sn := s.nodes[cc.Node-1]; cc.Type == raftlite.ConfAddLearner && !sn.created {
		// The node layer creates the replica with the configuration of
		// the entry that adds it.
		sn.created, sn.initConf = true, ent.Conf
		s.start(sn, false)
	}
}

// logLag is how far, in offsets, the shortest log of a node that exists
// lags the longest.
func (s *sim) logLag() int64 {
	lo, hi := int64(-1), int64(-1)
	for _, sn := range s.nodes {
		if !sn.created {
			continue
		}
		end := sn.disk.Log.EndOffset()
		if lo < 0 || end < lo {
			lo = end
		}
		hi = max(hi, end)
	}
	return hi - lo
}
