package groups

import (
	"fmt"
	"sort"
)

// Describing, listing and deleting groups (the operator's calls).

// MemberDescription is one member as DescribeGroups shows it.
type MemberDescription struct {
	ID, InstanceID, ClientID, Host string
	Metadata                       []byte
	Assignment                     []byte
}

// Description is a group as DescribeGroups shows it.
type Description struct {
	Name         string
	State        State
	ProtocolType string
	Protocol     string
	Generation   int32
	Members      []MemberDescription
}

// Describe is a group's state; ErrUnknownGroup when the coordinator
// holds no such group.
func (c *Coordinator) Describe(name string) (Description, error) {
	defer c.run()
	g := c.groups[name]
	if g == nil {
		return Description{Name: name, State: Dead}, fmt.Errorf("%w: %q", ErrUnknownGroup, name)
	}
	d := Description{Name: name, State: g.state, ProtocolType: g.protocolType, Protocol: g.protocol, Generation: g.generation}
	for _, id := range g.sortedIDs() {
		m := g.members[id]
		d.Members = append(d.Members, MemberDescription{ID: id, InstanceID: m.instance, ClientID: m.clientID, Host: m.host,
			Metadata: m.metadata(g.protocol), Assignment: m.assignment})
	}
	return d, nil
}

// List describes every group, sorted by name, without members.
func (c *Coordinator) List() []Description {
	defer c.run()
	out := make([]Description, 0, len(c.groups))
	for _, g := range c.groups {
		out = append(out, Description{Name: g.name, State: g.state, ProtocolType: g.protocolType, Protocol: g.protocol, Generation: g.generation})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Delete forgets an empty group and its committed offsets. It answers
// at once; the tombstones follow every earlier record into the log, so
// a coordinator that replays the log does not find the group again
// unless the log lost them (then the group, empty, is deleted again).
func (c *Coordinator) Delete(name string) error {
	defer c.run()
	g := c.groups[name]
	switch {
	case g == nil:
		return fmt.Errorf("%w: %q", ErrUnknownGroup, name)
	case len(g.members) > 0:
		return fmt.Errorf("%w: %q has %d", ErrNonEmptyGroup, name, len(g.members))
	}
	recs := make([]Record, 0, len(g.offsets)+1)
	for _, tp := range sortedPartitions(g.offsets) {
		recs = append(recs, Record{Key: OffsetKey(name, tp)})
	}
	recs = append(recs, Record{Key: GroupKey(name)})
	delete(c.groups, name)
	c.persist(recs, nil)
	return nil
}
