package controller

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/raftlite"
	"github.com/corestream/corestream/shard/partition"
)

// The roster driver (docs/design/membership.md): the first metadata
// primary records cluster.nodes as the roster, and each roster command
// (a node added: joining; removed: leaving) is followed by the metadata
// group's membership change, one step at a time on the metadata primary:
// a joining node is added as a learner, promoted once it holds the
// committed log, and marked active; a leaving node is removed from the
// group and then from the roster. Every step is read again from the
// committed roster and the group's own configuration, so a new metadata
// primary resumes where the last one stopped.

const (
	// rosterDriveEvery is how often the metadata primary looks for a
	// roster member to move on (also after every commit).
	rosterDriveEvery = 200 * time.Millisecond
	// rosterPromoteWait bounds one promotion attempt of a joining node:
	// the learner must hold the committed log by then, else the driver
	// tries again at its next look.
	rosterPromoteWait = 5 * time.Second
)

func rosterMember(n config.RosterNode) metadata.Member {
	return metadata.Member{ID: int32(n.ID), ClientAddr: n.ClientAddr, ReplicationAddr: n.ReplicationAddr,
		HTTPAddr: n.HTTPAddr, KafkaAddr: n.KafkaAddr, Rack: n.Rack}
}

// MetaGroup is the metadata group's replica as the roster driver
// changes its membership; *partition.Replica is one. Every method runs
// on shard routes.MetaShard.
type MetaGroup interface {
	IsPrimary() bool
	// ConfCommitted says the group's last configuration change is
	// committed; Membership is its configuration.
	ConfCommitted() bool
	Membership() raftlite.Membership
	AddLearner(id raftlite.NodeID, done func(partition.ConfChangeResult))
	Promote(id raftlite.NodeID, wait time.Duration, done func(partition.ConfChangeResult))
	RemoveMember(id raftlite.NodeID, done func(partition.ConfChangeResult))
}

// RosterDeps is what the roster driver reads and does.
type RosterDeps struct {
	Log *slog.Logger
	// Meta is the controller's core: the committed roster and its
	// change in progress, and the proposal of the roster's commands.
	Meta Metadata
	// Group is the metadata group, whose membership follows the roster.
	Group MetaGroup
	// Ready is nil once this node's metadata is loaded (a primary seeds
	// and steps only then); Alive is the liveness signal (a node that
	// holds the only copy of a partition is not removed while up).
	Ready func() error
	Alive func(id int32) bool
	// RequirePrimary is nil when this node leads the metadata group,
	// else the error a roster change gets (with the primary's address).
	RequirePrimary func() error
	// Seed is cluster.nodes, recorded by the first metadata primary;
	// Clustered is false on a single node (no replication transport): it
	// cannot grow.
	Seed      []config.RosterNode
	Clustered bool
	// After arms a timer on shard routes.MetaShard; the driver looks
	// every rosterDriveEvery until Stopped.
	After   func(d time.Duration, fn func())
	Stopped func() bool
}

// RosterDriver seeds the metadata's roster and drives, on the metadata
// primary, the metadata group's membership change that follows each
// roster command (docs/design/membership.md); owned by shard
// routes.MetaShard.
type RosterDriver struct {
	d RosterDeps
	// seeding says the seed's command is in flight.
	seeding bool
	// busy says a membership step or roster command is in flight.
	busy bool
}

// NewRosterDriver starts the driver's loop: a look every
// rosterDriveEvery (and after every commit: Drive). REQUIRES: on shard
// routes.MetaShard.
func NewRosterDriver(d RosterDeps) *RosterDriver {
	rd := &RosterDriver{d: d}
	var loop func()
	loop = func() {
		if d.Stopped() {
			return
		}
		rd.Drive()
		d.After(rosterDriveEvery, loop)
	}
	d.After(rosterDriveEvery, loop)
	return rd
}

// maybeSeedRoster records cluster.nodes when this node leads a metadata
// group that has no roster yet (the cluster's first start, or one that
// ran a version without a committed roster). Two primaries that both try
// are harmless: the second is refused. A node running alone records
// none: it cannot grow, and its own [node] stays its roster, so that a
// node first started on port 0 and later on a fixed port advertises the
// port it has now.
func (rd *RosterDriver) maybeSeedRoster() {
	if !rd.d.Clustered || rd.seeding || len(rd.d.Seed) == 0 || rd.d.Meta.State().Roster() != nil || !rd.d.Group.IsPrimary() || rd.d.Ready() != nil {
		return
	}
	cmd := metadata.Command{Version: metadata.CommandVersion, Op: metadata.OpRosterSeed}
	for _, m := range rd.d.Seed {
		cmd.Members = append(cmd.Members, rosterMember(m))
	}
	rd.seeding = true
	rd.d.Meta.Propose(cmd, ProposeTimeout, func(_ metadata.Result, err error) {
		rd.seeding = false
		if err != nil && !errors.Is(err, metadata.ErrRosterChangePending) {
			rd.d.Log.Warn("roster: recording cluster.nodes in the metadata failed; retrying at the next commit", "err", err)
		}
	})
}

// Drive takes the next step of the roster change in progress, if
// this node is the metadata primary and no step is in flight. Every step
// is read again from the committed roster and the metadata group's own
// configuration, so a new metadata primary resumes where the last one
// stopped.
func (rd *RosterDriver) Drive() {
	rd.maybeSeedRoster()
	g := rd.d.Group
	if rd.busy || !g.IsPrimary() || rd.d.Ready() != nil {
		return
	}
	m := rd.d.Meta.State().RosterChange()
	if m == nil || !g.ConfCommitted() {
		return
	}
	conf := g.Membership()
	id := raftlite.NodeID(m.ID)
	var step string
	rd.busy = true
	confDone := func(res partition.ConfChangeResult) {
		rd.busy = false
		if res.Err != nil {
			rd.d.Log.Info("roster: membership step not taken; retrying", "node", m.ID, "step", step, "err", res.Err)
			return
		}
		rd.d.Log.Info("roster: metadata group changed", "node", m.ID, "step", step, "conf", fmt.Sprint(res.Conf))
		rd.Drive()
	}
	propose := func(op metadata.Op) {
		step = string(op)
		rd.d.Meta.Propose(metadata.Command{Version: metadata.CommandVersion, Op: op, Node: m.ID}, ProposeTimeout, func(_ metadata.Result, err error) {
			rd.busy = false
			if err != nil {
				rd.d.Log.Info("roster: command not recorded; retrying", "node", m.ID, "op", op, "err", err)
			}
		})
	}
	switch {
	case m.State == metadata.MemberJoining && conf.Learners.Has(id):
		step = "promote"
		g.Promote(id, rosterPromoteWait, confDone)
	case m.State == metadata.MemberJoining && conf.Voters.Has(id):
		propose(metadata.OpNodeActive)
	case m.State == metadata.MemberJoining:
		step = "add_learner"
		g.AddLearner(id, confDone)
	case m.State == metadata.MemberLeaving && conf.Members().Has(id):
		step = "remove"
		g.RemoveMember(id, confDone)
	case m.State == metadata.MemberLeaving:
		propose(metadata.OpNodeRemove)
	default:
		rd.busy = false
	}
}

// ChangeRoster answers the service's ChangeRoster: add a member
// (joining), start removing one (leaving), or list the roster. A change
// is answered once its command committed; the metadata group's
// membership steps follow in the background (Drive). REQUIRES: on shard
// routes.MetaShard.
func (rd *RosterDriver) ChangeRoster(req *service.RosterRequest, done func(service.RosterResult, error)) {
	list := func() service.RosterResult {
		var res service.RosterResult
		for _, m := range rd.d.Meta.State().Roster() {
			res.Members = append(res.Members, svcMember(*m))
		}
		if res.Members == nil { // not seeded yet: cluster.nodes
			for _, m := range rd.d.Seed {
				sm := svcMember(rosterMember(m))
				sm.State = string(metadata.MemberActive)
				res.Members = append(res.Members, sm)
			}
		}
		return res
	}
	if req.Action == service.RosterList {
		done(list(), nil)
		return
	}
	if err := rd.d.RequirePrimary(); err != nil {
		done(service.RosterResult{}, err)
		return
	}
	if !rd.d.Clustered {
		done(service.RosterResult{}, service.Errorf(service.ErrInvalidRequest,
			"this node runs alone (cluster.nodes lists at most itself), so it has no replication transport to reach a new node; restart it with cluster.nodes and cluster.secret to grow it"))
		return
	}
	var cmd metadata.Command
	var err error
	switch req.Action {
	case service.RosterAdd:
		r := req.Member
		cmd, err = rd.d.Meta.State().PlanAddNode(metadata.Member{ID: r.ID, ClientAddr: r.ClientAddr, ReplicationAddr: r.ReplicationAddr,
			HTTPAddr: r.HTTPAddr, KafkaAddr: r.KafkaAddr, Rack: r.Rack})
	case service.RosterRemove:
		cmd, err = rd.d.Meta.State().PlanRemoveNode(req.Member.ID, rd.d.Alive)
	default:
		err = service.Errorf(service.ErrInvalidRequest, "roster action %d is not add, remove or list", req.Action)
	}
	if err != nil {
		done(service.RosterResult{}, MetaKindErr(err))
		return
	}
	rd.d.Meta.Propose(cmd, ProposeTimeout, func(_ metadata.Result, err error) {
		if err != nil {
			done(service.RosterResult{}, MetaKindErr(err))
			return
		}
		rd.Drive()
		done(list(), nil)
	})
}

func svcMember(m metadata.Member) service.RosterMember {
	return service.RosterMember{ID: m.ID, ClientAddr: m.ClientAddr, ReplicationAddr: m.ReplicationAddr, HTTPAddr: m.HTTPAddr,
		KafkaAddr: m.KafkaAddr, Rack: m.Rack, State: string(m.State)}
}
