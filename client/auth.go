package client

import (
	"bufio"
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"time"

	"github.com/corestream/corestream/netio/wire"
	"github.com/corestream/corestream/netio/wire/scram"
)

// authenticate runs the SCRAM-SHA-256 exchange (docs/protocol.md,
// Authenticate) on a connection just handshaken, before its loops start.
// A node that does not list Authenticate is refused: carrying on would
// send this user's requests unauthenticated to a node the caller did not
// mean to trust (a downgrade).
func authenticate(ctx context.Context, nc net.Conn, hs *wire.HandshakeResponse, user, password string) error {
	if _, ok := hs.PickVersion(wire.APIAuthenticate); !ok {
		return fmt.Errorf("%w: the node does not offer authentication (Authenticate); refusing to connect unauthenticated", ErrUnsupported)
	}
	conv, err := scram.NewClientConversation(user, password, rand.Reader)
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { nc.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	r := bufio.NewReaderSize(nc, 4096)
	step := func(corr uint32, payload string) (*wire.AuthenticateResponse, error) {
		req := wire.AuthenticateRequest{Mechanism: wire.MechanismSCRAMSHA256, Payload: []byte(payload)}
		if _, err := nc.Write(wire.AppendRequest(nil, corr, 0, &req)); err != nil {
			return nil, ctxOr(ctx, fmt.Errorf("%w: %w", ErrUnreachable, err))
		}
		frame, err := readFrame(r, nil, wire.FrameBytesMaxDefault)
		if err != nil {
			return nil, ctxOr(ctx, fmt.Errorf("%w: %w", ErrUnreachable, err))
		}
		h, body, err := wire.ParseResponseHeader(frame)
		if err != nil {
			return nil, err
		}
		var resp wire.AuthenticateResponse
		if err := wire.DecodeResponseBody(h, body, 0, &resp); err != nil {
			return nil, err
		}
		return &resp, nil
	}
	first, err := step(1, conv.First())
	if err != nil {
		return err
	}
	if first.Complete {
		return nil // the node requires no authentication
	}
	final, err := conv.Final(string(first.Payload))
	if err != nil {
		return err
	}
	last, err := step(2, final)
	if err != nil {
		return err
	}
	if !last.Complete {
		return fmt.Errorf("%w: the exchange did not complete after its final step", wire.ErrMalformedResponse)
	}
	if err := conv.Verify(string(last.Payload)); err != nil {
		return err
	}
	if !stop() {
		return ctx.Err()
	}
	nc.SetDeadline(time.Time{})
	return nil
}
