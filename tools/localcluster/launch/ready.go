package launch

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/corestream/corestream/netio/wire"
)

// readyPollEvery is the pause between two readiness probes.
const readyPollEvery = 50 * time.Millisecond

// Status asks the node at addr for its view of the cluster.
func Status(ctx context.Context, addr string) (*wire.ClusterStatusResponse, error) {
	return StatusTLS(ctx, addr, nil)
}

// StatusTLS is Status over TLS with tc (nil: plaintext).
func StatusTLS(ctx context.Context, addr string, tc *tls.Config) (*wire.ClusterStatusResponse, error) {
	var st wire.ClusterStatusResponse
	if err := RequestTLS(ctx, addr, tc, &wire.ClusterStatusRequest{}, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Request asks the node at addr, and only that node, over one new
// connection: a Handshake, then req, whose answer is decoded into resp
// (a broker's error answer comes back as a *wire.ErrorResponse). The SDK
// routes requests to whichever node it likes; probes of one node's view
// use this instead.
func Request(ctx context.Context, addr string, req wire.Request, resp wire.Response) error {
	return RequestTLS(ctx, addr, nil, req, resp)
}

// RequestTLS is Request over TLS with tc (nil: plaintext).
func RequestTLS(ctx context.Context, addr string, tc *tls.Config, req wire.Request, resp wire.Response) error {
	var c net.Conn
	var err error
	if tc != nil {
		d := tls.Dialer{Config: tc}
		c, err = d.DialContext(ctx, "tcp", addr)
	} else {
		var d net.Dialer
		c, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	r := bufio.NewReader(c)
	var hs wire.HandshakeResponse
	if err := call(c, r, 1, &wire.HandshakeRequest{ProtocolMin: wire.ProtocolVersionMin, ProtocolMax: wire.ProtocolVersionMax,
		ClientID: "localcluster", ClientSoftware: "localcluster"}, &hs); err != nil {
		return err
	}
	return call(c, r, 2, req, resp)
}

// call sends one request (version 0) and reads its answer.
func call(c net.Conn, r *bufio.Reader, corr uint32, req wire.Request, resp wire.Response) error {
	if _, err := c.Write(wire.AppendRequest(nil, corr, 0, req)); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > 16<<20 {
		return fmt.Errorf("launch: a %d-byte answer to %s", n, req.APIKey())
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return err
	}
	h, body, err := wire.ParseResponseHeader(buf)
	if err != nil {
		return err
	}
	if h.CorrelationID != corr {
		return fmt.Errorf("launch: answer to request %d, want %d", h.CorrelationID, corr)
	}
	return wire.DecodeResponseBody(h, body, 0, resp)
}

// formed says why the status is not yet a formed cluster of ids ("" when
// it is): a metadata primary known and every node alive.
func formed(st *wire.ClusterStatusResponse, ids []int) string {
	if st.MetadataPrimaryID <= 0 {
		return "no metadata primary yet"
	}
	alive := map[int32]bool{}
	for _, n := range st.Nodes {
		alive[n.ID] = n.Alive
	}
	for _, id := range ids {
		if !alive[int32(id)] {
			return fmt.Sprintf("node %d not seen alive yet", id)
		}
	}
	return ""
}

// WaitFormed polls every node until each answers on its client port and
// sees a metadata primary and every node of the plan alive: topics created
// from then on are placed over the whole roster. exited, when not nil, is
// checked between polls: an error from it (a node that died) ends the
// wait at once.
func (p *Plan) WaitFormed(ctx context.Context, exited func() error) error {
	ids := make([]int, len(p.Nodes))
	for i, n := range p.Nodes {
		ids[i] = n.ID
	}
	for {
		if exited != nil {
			if err := exited(); err != nil {
				return err
			}
		}
		why := ""
		for _, n := range p.Nodes {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			st, err := StatusTLS(pctx, n.ClientAddr, p.clientTLS)
			cancel()
			switch {
			case err != nil:
				why = fmt.Sprintf("node %d (%s): %v", n.ID, n.ClientAddr, err)
			case formed(st, ids) != "":
				why = fmt.Sprintf("node %d: %s", n.ID, formed(st, ids))
			}
			if why != "" {
				break
			}
		}
		if why == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("launch: the cluster did not form: %s (%w)", why, ctx.Err())
		case <-time.After(readyPollEvery):
		}
	}
}
