package controller

import (
	"fmt"
	"slices"
	"time"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/routes"
	"github.com/corestream/corestream/cluster/service"
)

// Draining and replacing a node (issue 16; docs/operations.md, "Draining
// and replacing a node").
//
// A drain is a metadata mark (metadata.OpDrainNode). The reassigner on the
// metadata primary turns it into ordinary moves (reassign.go), at most
// cluster.reassign_concurrency recorded at once, one start per check: for
// each partition with a replica on the node and no move in progress, the
// node's slot goes to metadata.DrainTarget (the replacement of a replace,
// else a live node not draining, another rack first, then the least
// loaded). The move adds the new replica before it removes the old one, so
// the partition keeps its factor of complete copies throughout.
//
// Primaries go first: while the node leads a partition that another live
// in-sync replica can take, the reassigner asks for that leadership
// transfer (again every drainTransferEvery) and starts none of the node's
// moves, for at most drainPrimariesFirstWait; after that a partition it
// still leads moves like the others (its primary removes itself last and
// hands over). The balancer counts a draining node as down, so neither it
// nor the preferred-primary rule gives the node a primary back, and
// placement does not choose it for new partitions.
//
// Everything is read again from the metadata and the routes at each
// check, so a new metadata primary resumes a drain where it stands.

// Bounds of draining.
const (
	// drainPrimariesFirstWait bounds how long a drain waits for its
	// node's primaries to move before it moves replicas anyway.
	drainPrimariesFirstWait = 10 * time.Second
	// drainTransferEvery is how often a leadership transfer off a
	// draining node is asked again for one partition.
	drainTransferEvery = 2 * time.Second
)

// drainCandidate is a partition with a replica on a draining node.
type drainCandidate struct {
	t    *metadata.Topic
	p    int32
	reps []metadata.NodeID
}

// planDrains asks for the primary transfers and starts the next move of
// the drains in v. REQUIRES: on shard routes.MetaShard, on the metadata primary.
func (ra *Reassigner) planDrains(v *routes.View, now time.Time) {
	if len(v.Drains) == 0 {
		clear(ra.drainSeen)
		clear(ra.transferred)
		return
	}
	if ra.starting {
		return
	}
	free := ra.d.Concurrency - len(v.Moves)
	var eligible []metadata.NodeID
	for _, id := range ra.d.Roster() {
		if ra.d.Alive(id) && v.Drains[id] == nil {
			eligible = append(eligible, id)
		}
	}
	load, racks := replicaLoad(v), ra.d.Racks()
	for _, id := range sortedDrainNodes(v) {
		d := v.Drains[id]
		first, ok := ra.drainSeen[id]
		if !ok {
			first = now
			ra.drainSeen[id] = now
			ra.d.Log.Info("node drain driven", "node", id, "replacement", d.Replacement)
		}
		primariesFirst := now.Sub(first) < drainPrimariesFirstWait
		led := 0
		var cands []drainCandidate
		for _, t := range v.Sorted {
			for p, reps := range t.Replicas {
				if !slices.Contains(reps, id) {
					continue
				}
				key := routes.Key(t.ID, int32(p))
				if v.Moving[key] != nil {
					continue
				}
				if primariesFirst {
					if rt, ok := ra.d.Routes.Get(key); ok && rt.Leader == id && ra.d.Alive(id) {
						if to := drainTransferTarget(reps, rt, v, ra.d.Alive); to != 0 {
							led++
							if last, ok := ra.transferred[key]; !ok || now.Sub(last) >= drainTransferEvery {
								ra.transferred[key] = now
								ra.d.Transfer(t.ID, int32(p), id, to)
							}
							continue
						}
					}
				}
				cands = append(cands, drainCandidate{t, int32(p), reps})
			}
		}
		if led > 0 {
			continue // its primaries first
		}
		for _, c := range cands {
			if free <= 0 {
				return
			}
			target, ok := metadata.DrainTarget(c.reps, *d, eligible, racks, load)
			if !ok {
				continue // no node fits now (all others down or holding it)
			}
			ra.startDrainMove(c, target, id)
			return // one start per check: the next one reads the result
		}
	}
}

// drainTransferTarget is the replica that takes over a partition led by a
// draining node: the first of reps, in preference order, that is live,
// not draining and in sync (0: none).
func drainTransferTarget(reps []metadata.NodeID, rt routes.Route, v *routes.View, alive func(int32) bool) int32 {
	for _, r := range reps {
		if r == rt.Leader || v.Drains[r] != nil || !alive(r) {
			continue
		}
		if rt.InSync != nil && !slices.Contains(rt.InSync, r) {
			continue
		}
		return r
	}
	return 0
}

// startDrainMove records the move of c to target.
func (ra *Reassigner) startDrainMove(c drainCandidate, target []metadata.NodeID, node int32) {
	roster := ra.d.Roster()
	cmd := metadata.Command{Version: metadata.CommandVersion, Op: metadata.OpReassignStart, Name: c.t.Name, ID: c.t.ID, Partition: c.p,
		Target: target, Roster: roster, AtMs: ra.d.Clock.Now().UnixMilli()}
	ra.starting = true
	ra.d.Meta.Propose(cmd, ProposeTimeout, func(_ metadata.Result, err error) {
		ra.starting = false
		if err != nil {
			ra.d.Log.Warn("drain move not started", "node", node, "topic", c.t.Name, "partition", c.p, "to", target, "err", err)
			return
		}
		ra.d.Log.Info("drain move started", "node", node, "topic", c.t.Name, "partition", c.p, "from", c.reps, "to", target)
	})
}

// replicaLoad counts the replicas each node holds or is receiving.
func replicaLoad(v *routes.View) map[metadata.NodeID]int {
	load := map[metadata.NodeID]int{}
	for _, t := range v.Sorted {
		for _, reps := range t.Replicas {
			for _, r := range reps {
				load[r]++
			}
		}
	}
	for _, mv := range v.Moves {
		for _, r := range mv.Target {
			if !slices.Contains(mv.From, r) {
				load[r]++
			}
		}
	}
	return load
}

func sortedDrainNodes(v *routes.View) []metadata.NodeID {
	ids := make([]metadata.NodeID, 0, len(v.Drains))
	for id := range v.Drains {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// drainStatuses describes every draining node. REQUIRES: on shard
// metaShard.
func (ra *Reassigner) drainStatuses() []service.DrainStatus {
	v := ra.d.View()
	var out []service.DrainStatus
	for _, id := range sortedDrainNodes(v) {
		st := service.DrainStatus{Node: id, Replacement: v.Drains[id].Replacement}
		for _, t := range v.Sorted {
			for p, reps := range t.Replicas {
				if slices.Contains(reps, id) {
					st.Replicas++
				}
				if rt, ok := ra.d.Routes.Get(routes.Key(t.ID, int32(p))); ok && rt.Leader == id {
					st.Primaries++
				}
			}
		}
		for _, mv := range v.Moves {
			if slices.Contains(mv.From, id) && !slices.Contains(mv.Target, id) {
				st.Moving++
			}
		}
		st.Done = st.Replicas == 0 && st.Primaries == 0
		out = append(out, st)
	}
	return out
}

// serveDrain answers a drain, undrain or replace: checked against the
// metadata and the roster, then recorded; the moves run in the
// background (list them, or watch the drain's status). REQUIRES: on
// shard routes.MetaShard.
func (ra *Reassigner) serveDrain(req *service.ReassignRequest, done func(service.ReassignResult, error)) {
	node, repl := req.Node, int32(0)
	op := metadata.OpDrainNode
	switch req.Action {
	case service.ReassignUndrain:
		op = metadata.OpUndrainNode
		if ra.d.Meta.State().Draining(node) == nil {
			done(service.ReassignResult{}, MetaKindErr(fmt.Errorf("%w: node %d", metadata.ErrNotDraining, node)))
			return
		}
	case service.ReassignReplace:
		repl = req.Replacement
		if repl == 0 {
			done(service.ReassignResult{}, service.Errorf(service.ErrInvalidRequest, "replace names no new node: replace OLD NEW"))
			return
		}
	}
	roster := ra.rosterIDs()
	if op == metadata.OpDrainNode {
		if err := ra.d.Meta.State().CheckDrain(node, repl, roster); err != nil {
			done(service.ReassignResult{}, MetaKindErr(err))
			return
		}
	}
	if req.DryRun {
		done(service.ReassignResult{Drains: ra.drainStatuses()}, nil)
		return
	}
	cmd := metadata.Command{Version: metadata.CommandVersion, Op: op, Node: node, Replacement: repl, Roster: roster,
		AtMs: ra.d.Clock.Now().UnixMilli()}
	ra.d.Meta.Propose(cmd, ProposeTimeout, func(_ metadata.Result, err error) {
		if err != nil {
			done(service.ReassignResult{}, MetaKindErr(err))
			return
		}
		ra.d.Log.Info("node drain recorded", "op", op, "node", node, "replacement", repl)
		done(service.ReassignResult{Drains: ra.drainStatuses()}, nil)
	})
}

// RacksOf is each roster node's rack (node.rack; missing: none).
func RacksOf(roster []config.RosterNode) map[int32]string {
	racks := map[int32]string{}
	for _, m := range roster {
		racks[int32(m.ID)] = m.Rack
	}
	return racks
}
