package native

import (
	"github.com/corestream/corestream/cluster/frontend"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/segment/vfs"
)

// The native data requests: decoded on the connection's shard, served by
// the service on the shard that owns the partition (inline when that is
// the connection's), answered back on the connection's shard.

func (h *Handler) produce(c *netio.Conn, hdr wire.RequestHeader, body []byte) {
	var req wire.ProduceRequest
	if err := req.DecodeBody(body, hdr.APIVersion); err != nil {
		replyErr(c, hdr, err)
		return
	}
	// Records borrows the read buffer; the service copies it when the
	// partition is served on another shard. On this shard the log may
	// retain the read buffer instead and write a large batch from it
	// (frontend.Lend, which the log calls during this call or not at all).
	sreq := service.ProduceRequest{PartitionRef: serviceRef(&req.PartitionRef), Acks: service.Acks(req.Acks),
		Timeout: msDuration(req.TimeoutMs), Records: req.Records, Lend: frontend.Lend(c)}
	after := h.track(c, req.Topic, req.Partition)
	h.svcOf(c).Produce(c.Shard(), &sreq, func(res service.ProduceResult, err error) {
		if err != nil {
			replyErr(c, hdr, err)
		} else {
			resp := wire.ProduceResponse{BaseOffset: res.BaseOffset, LogAppendTimeMs: res.LogAppendTimeMs, LogStartOffset: res.LogStartOffset}
			reply(c, hdr, &resp)
		}
		after()
	})
}

func (h *Handler) fetch(c *netio.Conn, hdr wire.RequestHeader, body []byte) {
	var req wire.FetchRequest
	if err := req.DecodeBody(body, hdr.APIVersion); err != nil {
		replyErr(c, hdr, err)
		return
	}
	sreq := service.FetchRequest{PartitionRef: serviceRef(&req.PartitionRef), Offset: req.FetchOffset,
		MaxBytes: req.MaxBytes, MinBytes: req.MinBytes, MaxWait: msDuration(req.MaxWaitMs), Rack: req.Rack}
	after := h.track(c, req.Topic, req.Partition)
	h.svcOf(c).Fetch(c.Shard(), &sreq, func(res service.FetchResult, err error) {
		if err != nil {
			replyErr(c, hdr, err)
		} else {
			c.Reply(fetchResponse(hdr, &res))
		}
		after()
	})
}

func (h *Handler) listOffsets(c *netio.Conn, hdr wire.RequestHeader, body []byte) {
	var req wire.ListOffsetsRequest
	if err := req.DecodeBody(body, hdr.APIVersion); err != nil {
		replyErr(c, hdr, err)
		return
	}
	sreq := service.ListOffsetsRequest{PartitionRef: serviceRef(&req.PartitionRef), Timestamp: req.Timestamp}
	after := h.track(c, req.Topic, req.Partition)
	h.svcOf(c).ListOffsets(c.Shard(), &sreq, func(res service.ListOffsetsResult, err error) {
		if err != nil {
			replyErr(c, hdr, err)
		} else {
			resp := wire.ListOffsetsResponse{Offset: res.Offset, Timestamp: res.Timestamp, LogStartOffset: res.LogStartOffset,
				HighWatermark: res.HighWatermark}
			reply(c, hdr, &resp)
		}
		after()
	})
}

// serviceRef is a native partition reference as the service's.
func serviceRef(ref *wire.PartitionRef) service.PartitionRef {
	return service.PartitionRef{Topic: ref.Topic, Partition: ref.Partition, TopicID: metadata.TopicID(ref.TopicID), Generation: ref.Generation}
}

// track counts a data request for partition p of topic toward moving
// the connection to the shard that owns it (frontend.Mover), and returns
// what to run once the request is answered.
func (h *Handler) track(c *netio.Conn, topic string, p int32) func() {
	st := c.Context().(*connState)
	return h.mover.Track(c, &st.homing, h.mover.Route(c, topic, p))
}

// MigrateAfter is how many consecutive data requests for partitions of
// one other shard move a connection to that shard (frontend.MigrateAfter,
// shared with the Kafka listener).
const MigrateAfter = frontend.MigrateAfter

// fetchResponse is the response header from memory followed by the
// batches sent with sendfile from the segment files; the spans are
// released once the bytes are handed to the kernel (or the connection
// closes).
func fetchResponse(hdr wire.RequestHeader, res *service.FetchResult) netio.Response {
	preferred := res.PreferredReadReplica
	if preferred <= 0 {
		preferred = wire.NodeNone // node ids start at 1: 0 is a result that named none
	}
	head := wire.AppendFetchResponseHeader(make([]byte, 0, wire.FetchResponseHeaderBytesMax), hdr.CorrelationID, hdr.APIVersion,
		res.HighWatermark, res.LogStartOffset, preferred, int(res.Records.Bytes))
	recs := res.Records
	files := make([]netio.FileRange, 0, len(recs.Spans))
	for _, sp := range recs.Spans {
		if sp.Fd() == vfs.InvalidFd {
			// A file system without descriptors (tests): copy.
			var err error
			if head, err = sp.AppendTo(head); err != nil {
				recs.Release()
				return netio.Response{Header: wire.AppendErrorResponse(nil, hdr.CorrelationID,
					wire.Errorf(wire.ErrStorageError, "reading a segment: %v", err))}
			}
			continue
		}
		files = append(files, netio.FileRange{Fd: int(sp.Fd()), Off: sp.Pos, Len: sp.Len})
	}
	return netio.Response{Header: head, Files: files, Release: func(error) { recs.Release() }}
}
