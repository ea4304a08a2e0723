package node

import (
	"time"

	ctl "github.com/corestream/corestream/cluster/controller"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
)

// The controller's side of the service's admin calls (svc_admin.go):
// each runs on the controller's shard and answers through done exactly
// once, there.

// admit is nil when the controller can serve an admin call now.
func (c *controller) admit(needPrimary bool) error {
	if c.r == nil {
		return service.Errorf(service.ErrNodeNotAvailable, "the metadata group is not open on this node")
	}
	if needPrimary {
		if err := c.requireMetaPrimary(); err != nil {
			return err
		}
	}
	// A primary plans from its state: until its term's first entry is
	// applied that state may lack committed commands (a topic it would
	// create twice, offsets it would not return).
	return c.d.ready()
}

// timeoutOf is an admin call's timeout: adminTimeoutDefault for 0.
func timeoutOf(d time.Duration) time.Duration {
	if d <= 0 {
		return adminTimeoutDefault
	}
	return d
}

// metaKindErr gives a metadata error its service kind (ctl.MetaKindErr).
var metaKindErr = ctl.MetaKindErr

// rosterIDs lists the roster's ids; eligible lists the live ones not
// draining (placement does not choose a draining node).
func (c *controller) rosterIDs() (roster, eligible []metadata.NodeID) {
	for _, m := range c.d.roster() {
		roster = append(roster, metadata.NodeID(m.ID))
		if c.d.alive(int32(m.ID)) && c.State().Draining(metadata.NodeID(m.ID)) == nil {
			eligible = append(eligible, metadata.NodeID(m.ID))
		}
	}
	return roster, eligible
}

// rosterRacks is each roster node's rack (node.rack), over which
// placement spreads a partition's replicas.
func (c *controller) rosterRacks() map[metadata.NodeID]string {
	racks := map[metadata.NodeID]string{}
	for _, m := range c.d.roster() {
		racks[metadata.NodeID(m.ID)] = m.Rack
	}
	return racks
}
