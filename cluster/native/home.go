package native

import (
	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/netio/wire"
)

// home serves Home: it answers, then moves the connection to the shard
// that owns the partition named, so that a client holding one connection
// per shard (the Go SDK when the node lists Home) sends every produce and
// fetch to the shard that serves it, and no request crosses a thread. The
// answer is queued before the move and leaves from the new shard with
// the connection; the connection reads nothing more here (netio's
// Migrate), so the client's next request is read where it is served.
//
// Home needs the connection idle (the Home request alone in flight):
// Migrate cannot move answers still owed by another shard. Home with
// Stay only answers, on any connection. A move that
// fails (the owner's inbox full, the node stopping) leaves the connection
// where it is, which serves it correctly, only with the hops.
func (h *Handler) home(c *netio.Conn, st *connState, hdr wire.RequestHeader, body []byte) {
	var req wire.HomeRequest
	if err := req.DecodeBody(body, hdr.APIVersion); err != nil {
		replyErr(c, hdr, err)
		return
	}
	if err := req.Validate(); err != nil {
		replyErr(c, hdr, err)
		return
	}
	if n := c.InFlight(); n != 1 && !req.Stay {
		replyErr(c, hdr, wire.Errorf(wire.ErrInvalidRequest,
			"Home with %d other requests in flight: send it on an idle connection (before any data request, or after every answer)", n-1))
		return
	}
	// Locate checks that the partition exists and, when authentication is
	// on, that the user may describe its topic: the answer says where a
	// partition lives, which is not for everyone to probe.
	if _, _, err := h.svcOf(c).Locate(req.Topic, req.Partition); err != nil {
		replyErr(c, hdr, err)
		return
	}
	owner := h.mover.Owner(req.Topic, req.Partition)
	if owner < 0 {
		replyErr(c, hdr, wire.Errorf(wire.ErrUnknownTopicOrPartition,
			"Home: this node has no partition %d of topic %q; refresh the metadata", req.Partition, req.Topic))
		return
	}
	resp := wire.HomeResponse{Shard: uint16(owner), Shards: uint16(h.mover.Shards())}
	reply(c, hdr, &resp)
	if req.Stay || owner == c.Shard().ID() || c.Closed() {
		return
	}
	err := h.mover.MoveTo(c, &st.homing, owner, func(err error) {
		if err != nil {
			h.log.Debug("Home: the connection stays on its shard", "remote", c.RemoteAddr(), "err", err)
		}
	})
	if err != nil {
		h.log.Debug("Home: the connection stays on its shard", "remote", c.RemoteAddr(), "err", err)
	}
}
