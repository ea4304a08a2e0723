package client

import (
	"context"

	"github.com/corestream/corestream/netio/wire"
)

// Reassign sends a replica-move request to the metadata primary: start
// (or check, with DryRun) the moves of a plan, cancel moves, or list
// those in progress (req.Action: wire.ReassignStart, ReassignCancel,
// ReassignList). A start checks the whole plan before any move starts and
// answers INVALID_REQUEST or UNKNOWN_TOPIC_OR_PARTITION naming the first
// bad move; the moves run in the background (list them to follow their
// progress). A list or a dry run is retried on a new metadata primary; a
// start or cancel is not (it may have been recorded).
func (c *Client) Reassign(ctx context.Context, req *wire.ReassignRequest) (*wire.ReassignResponse, error) {
	var resp wire.ReassignResponse
	if err := c.doAdmin(ctx, metadataPrimary, req, &resp, req.Action == wire.ReassignList || req.DryRun); err != nil {
		return nil, err
	}
	if req.Action != wire.ReassignList && !req.DryRun {
		c.kickRefresh()
	}
	return &resp, nil
}
