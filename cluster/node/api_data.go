package node

import (
	"time"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/vfs"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"
)

// dataRequest routes a Produce, Fetch or ListOffsets to the shard that
// owns the partition: inline when that is the connection's shard, else
// through the owner's inbox with a copy of the frame (the read buffer is
// reused once OnFrame returns).
func (h *handler) dataRequest(c *netio.Conn, hdr wire.RequestHeader, body []byte) {
	name, p, ok := wire.PeekPartition(hdr.APIKey, body)
	if !ok {
		replyErr(c, hdr, wire.Errorf(wire.ErrInvalidRequest, "%s body too short for a partition reference", hdr.APIKey))
		return
	}
	t := h.n.view.Load().Topics[string(name)]
	if t == nil || p < 0 || int(p) >= t.Partitions() {
		replyErr(c, hdr, h.n.missingPartition(string(name), p, t))
		return
	}
	home := c.Shard()
	owner := h.n.group.Shard(h.n.shardOf(t.ID, p))
	st := c.Context().(*connState)
	if owner == home {
		st.streak = 0
		h.n.serveData(home, t, p, hdr, body, func(r netio.Response) { c.Reply(r) })
		return
	}
	if owner.ID() == st.target {
		st.streak++
	} else {
		st.target, st.streak = owner.ID(), 1
	}
	frame := append([]byte(nil), body...)
	err := shard.CallAsync(home, owner, func(to *shard.Shard, done func(netio.Response)) {
		h.n.serveData(to, t, p, hdr, frame, done)
	}, func(r netio.Response) {
		c.Reply(r)
		h.maybeMigrate(c, st)
	})
	if err != nil {
		replyErr(c, hdr, busy(err))
	}
}

// migrateAfter is how many consecutive data requests for partitions of one
// other shard move a connection to that shard.
const migrateAfter = 8

// maybeMigrate moves a connection whose requests all go to one other
// shard (a producer or consumer of partitions owned there) onto that
// shard, once it has nothing in flight: its requests then run inline,
// without two cross-thread hand-offs each. A connection that spreads its
// requests over shards stays where the kernel put it.
func (h *handler) maybeMigrate(c *netio.Conn, st *connState) {
	if st.streak < migrateAfter || st.migrating || c.InFlight() > 0 || c.Closed() {
		return
	}
	st.migrating = true
	to := h.n.group.Shard(st.target)
	err := c.Migrate(to, func(_ *netio.Conn, err error) {
		st.migrating, st.streak = false, 0
		if err == nil {
			h.n.migrations.Add(1)
		}
	})
	if err != nil {
		st.migrating, st.streak = false, 0
	}
}

// missingPartition is unknownPartition, unless this node's metadata is not
// loaded yet: then the topic may well exist, and the answer says so
// (METADATA_NOT_READY, ready.go).
func (n *Node) missingPartition(name string, p int32, t *metadata.Topic) error {
	if t == nil {
		if err := n.metadataReady(); err != nil {
			return err
		}
	}
	return unknownPartition(name, p, t)
}

func unknownPartition(name string, p int32, t *metadata.Topic) error {
	if t == nil {
		return wire.Errorf(wire.ErrUnknownTopicOrPartition, "topic %q does not exist", name)
	}
	return wire.Errorf(wire.ErrUnknownTopicOrPartition, "topic %q has partitions 0..%d, not %d", name, t.Partitions()-1, p)
}

// serveData runs a data request on the owning shard sh and answers
// through done (exactly once).
func (n *Node) serveData(sh *shard.Shard, t *metadata.Topic, p int32, hdr wire.RequestHeader, body []byte, done func(netio.Response)) {
	fail := func(err error) {
		done(netio.Response{Header: wire.AppendErrorResponse(nil, hdr.CorrelationID, n.withAddress(err))})
	}
	r, err := n.replicaFor(sh, t, p)
	if err != nil {
		fail(err)
		return
	}
	// decode fills req from the body and applies the topic-id check.
	decode := func(req wire.Request, ref *wire.PartitionRef) bool {
		err := req.DecodeBody(body, hdr.APIVersion)
		if err == nil {
			err = checkTopicID(ref, t)
		}
		if err != nil {
			fail(err)
			return false
		}
		return true
	}
	switch hdr.APIKey {
	case wire.APIProduce:
		var req wire.ProduceRequest
		if !decode(&req, &req.PartitionRef) {
			return
		}
		args := partition.ProduceArgs{Generation: req.Generation, AcksPrimary: req.Acks == wire.AcksPrimary,
			Timeout: time.Duration(req.TimeoutMs) * time.Millisecond, Records: req.Records}
		r.Produce(&args, func(res partition.ProduceResult) {
			if res.Err != nil {
				fail(res.Err)
				return
			}
			resp := wire.ProduceResponse(res.Produced)
			done(netio.Response{Header: wire.AppendResponse(nil, hdr.CorrelationID, hdr.APIVersion, &resp)})
		})
	case wire.APIFetch:
		var req wire.FetchRequest
		if !decode(&req, &req.PartitionRef) {
			return
		}
		if n.stopped.Load() {
			req.MaxWaitMs = 0 // stopping: no new long polls (Stop answered the parked ones)
		}
		args := partition.FetchArgs{Generation: req.Generation, Offset: req.FetchOffset,
			MaxBytes: min(req.MaxBytes, wire.RecordsBytesMax), MinBytes: req.MinBytes,
			MaxWait: time.Duration(min(req.MaxWaitMs, wire.FetchWaitMsMax)) * time.Millisecond}
		r.Fetch(&args, func(res partition.FetchResult) {
			if res.Err != nil {
				fail(res.Err)
				return
			}
			done(fetchResponse(hdr, &res))
		})
	case wire.APIListOffsets:
		var req wire.ListOffsetsRequest
		if !decode(&req, &req.PartitionRef) {
			return
		}
		offs, err := r.ListOffsets(req.Generation, req.Timestamp)
		if err != nil {
			fail(err)
			return
		}
		resp := wire.ListOffsetsResponse(offs)
		done(netio.Response{Header: wire.AppendResponse(nil, hdr.CorrelationID, hdr.APIVersion, &resp)})
	}
}

// replicaFor finds the local replica of partition p of t on shard sh, or
// the routing error a client should see.
func (n *Node) replicaFor(sh *shard.Shard, t *metadata.Topic, p int32) (*partition.Replica, error) {
	key := shardKey(t.ID, p)
	if r := n.hosts[sh.ID()].Get(key); r != nil {
		return r, nil
	}
	if !hosts(t.Replicas[p], n.self) {
		e := wire.Errorf(wire.ErrNotPrimary, "node %d holds no replica of %s/%d", n.self, t.Name, p)
		if rt, ok := n.routes.get(key); ok && rt.leader > 0 {
			e.Hint = &wire.Hint{NodeID: rt.leader, Address: n.addrOf(rt.leader), Generation: rt.term}
		}
		return nil, e
	}
	if f, failed := n.openErrs.get(key); failed {
		return nil, n.openErr(t.Name, p, f)
	}
	e := wire.Errorf(wire.ErrPrimaryNotAvailable, "%s/%d is still opening on node %d", t.Name, p, n.self)
	e.RetryAfterMs = 10
	return nil, e
}

// checkTopicID applies routing check 1's id half: a request routed with
// another history of the name is refused.
func checkTopicID(ref *wire.PartitionRef, t *metadata.Topic) error {
	if ref.TopicID != (wire.TopicID{}) && [16]byte(ref.TopicID) != [16]byte(t.ID) {
		return wire.Errorf(wire.ErrUnknownTopicOrPartition, "topic %q now has id %s, not %s: the topic was deleted and created again",
			t.Name, t.ID, metadata.TopicID(ref.TopicID))
	}
	return nil
}

// fetchResponse is the response header from memory followed by the
// batches sent with sendfile from the segment files; the spans are
// released once the bytes are handed to the kernel (or the connection
// closes).
func fetchResponse(hdr wire.RequestHeader, res *partition.FetchResult) netio.Response {
	head := wire.AppendFetchResponseHeader(make([]byte, 0, wire.FetchResponseHeaderBytes), hdr.CorrelationID, hdr.APIVersion,
		res.HighWatermark, res.LogStartOffset, int(res.Bytes))
	spans := res.Spans
	files := make([]netio.FileRange, 0, len(spans))
	for _, sp := range spans {
		if sp.Fd() == vfs.InvalidFd {
			// A file system without descriptors (tests): copy.
			var err error
			if head, err = sp.AppendTo(head); err != nil {
				segment.ReleaseSpans(spans)
				return netio.Response{Header: wire.AppendErrorResponse(nil, hdr.CorrelationID,
					wire.Errorf(wire.ErrStorageError, "reading a segment: %v", err))}
			}
			continue
		}
		files = append(files, netio.FileRange{Fd: int(sp.Fd()), Off: sp.Pos, Len: sp.Len})
	}
	return netio.Response{Header: head, Files: files, Release: func(error) { segment.ReleaseSpans(spans) }}
}
