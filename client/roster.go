package client

import (
	"context"

	"github.com/corestream/corestream/netio/wire"
)

// ChangeRoster adds a node to the roster (wire.RosterAdd), starts
// removing a drained one (wire.RosterRemove, Member.ID only) or lists the
// roster (wire.RosterList), and returns the roster after the change. An
// add or remove goes to the metadata primary and is answered once
// recorded; the metadata group's membership steps follow (list to see a
// member go from joining to active, or leaving to gone). A list is
// retried on another node; a change is not (it may have been recorded).
func (c *Client) ChangeRoster(ctx context.Context, req *wire.ChangeRosterRequest) (*wire.ChangeRosterResponse, error) {
	var resp wire.ChangeRosterResponse
	target := metadataPrimary
	if req.Action == wire.RosterList {
		target = anyNode
	}
	if err := c.doAdmin(ctx, target, req, &resp, req.Action == wire.RosterList); err != nil {
		return nil, err
	}
	if req.Action != wire.RosterList {
		c.kickRefresh()
	}
	return &resp, nil
}
