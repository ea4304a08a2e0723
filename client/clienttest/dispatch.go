package clienttest

import (
	"slices"

	"github.com/corestream/corestream/netio/wire"
)

// dispatch handles one request frame on sc: counts it, applies a matching
// fault, decodes and handles it, and writes (or schedules) its response.
// It returns false when the connection must close.
func (c *Cluster) dispatch(sc *serverConn, h wire.RequestHeader, body []byte, flush bool) bool {
	if err := h.Check(); err != nil {
		sc.respond(h, nil, err, flush)
		return true
	}
	req := wire.NewRequest(h.APIKey)
	if err := req.DecodeBody(body, h.APIVersion); err != nil {
		sc.respond(h, nil, err, flush)
		return true
	}
	c.mu.Lock()
	c.requests[reqKey{sc.node, h.APIKey}]++
	r := describe(sc.node, h, body)
	f := c.matchFault(r)
	c.mu.Unlock()
	if f != nil && f.Then != nil {
		f.Then(r)
	}
	if f != nil {
		switch {
		case f.Close:
			return false
		case f.Err != nil:
			sc.respond(h, nil, f.Err, flush)
			return true
		}
	}
	if fr, ok := req.(*wire.FetchRequest); ok && f == nil {
		c.serveFetch(sc, h, fr, flush)
		return true
	}
	resp, err := c.handle(sc.node, req)
	if f != nil {
		switch {
		case f.CloseAfter:
			sc.flush() // responses already written go out; this one is lost
			return false
		case f.Delay > 0 || f.Hold != nil:
			var frame []byte
			if err != nil {
				frame = wire.AppendErrorResponse(nil, h.CorrelationID, err)
			} else {
				frame = wire.AppendResponse(nil, h.CorrelationID, h.APIVersion, resp)
			}
			sc.respondLater(frame, f.Delay, f.Hold)
			return true
		}
	}
	sc.respond(h, resp, err, flush)
	return true
}

// handle serves every request but a long-polling fetch.
func (c *Cluster) handle(node int32, req wire.Request) (wire.Response, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.cutOffAdmin(node, req); err != nil {
		return nil, err
	}
	switch r := req.(type) {
	case *wire.HandshakeRequest:
		v, err := wire.NegotiateProtocol(r.ProtocolMin, r.ProtocolMax)
		if err != nil {
			return nil, err
		}
		hs := wire.ServerHandshake(v, node, c.opts.ClusterID, "clienttest", wire.FrameBytesMaxDefault)
		// A fake node has no shards: it does not offer Home, as a node
		// that predates it, so the SDK keeps one connection to it.
		hs.APIs = slices.DeleteFunc(hs.APIs, func(a wire.APIVersion) bool { return a.Key == wire.APIHome })
		return hs, nil
	case *wire.ProduceRequest:
		return c.produce(node, r)
	case *wire.FetchRequest:
		resp, _, err := c.fetchLocked(node, r)
		return resp, err
	case *wire.ListOffsetsRequest:
		return c.listOffsets(node, r)
	case *wire.DescribePartitionRequest:
		return c.describePartition(node, r)
	case *wire.MetadataRequest:
		if n := c.node(node); n.cut != nil {
			return c.cutOffMetadata(n, r), nil
		}
		return c.metadata(r), nil
	case *wire.CreateTopicRequest:
		return c.createTopic(node, r)
	case *wire.DeleteTopicRequest:
		return c.deleteTopic(node, r)
	case *wire.ListTopicsRequest:
		return c.listTopics(), nil
	case *wire.DescribeTopicRequest:
		return c.describeTopic(r)
	case *wire.AddPartitionsRequest:
		return c.addPartitions(node, r)
	case *wire.CommitOffsetsRequest:
		return c.commitOffsets(node, r)
	case *wire.FetchOffsetsRequest:
		return c.fetchOffsets(node, r)
	case *wire.InitProducerRequest:
		return c.initProducer(r)
	case *wire.ClusterStatusRequest:
		return c.clusterStatus(), nil
	case *wire.MovePrimaryRequest:
		return c.movePrimary(node, r)
	case *wire.RebalanceRequest:
		return c.rebalance(node, r)
	}
	return nil, wire.Errorf(wire.ErrUnsupportedVersion, "clienttest does not serve %s", req.APIKey())
}
