package client

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/corestream/corestream/netio/wire"
)

// A client configured with a user refuses a node whose handshake does not
// offer Authenticate (a node too old, or something posing as one), rather
// than carry on unauthenticated: a downgrade.
func TestAuthRefusesANodeWithoutAuthenticate(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan struct{})
	go func() {
		defer close(served)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(c, frame); err != nil {
			return
		}
		h, _, err := wire.ParseRequestHeader(frame)
		if err != nil {
			return
		}
		hs := wire.ServerHandshake(wire.ProtocolVersionMax, 1, "old", "corestream/old", wire.FrameBytesMaxDefault)
		var apis []wire.APIVersion
		for _, a := range hs.APIs {
			if a.Key != wire.APIAuthenticate {
				apis = append(apis, a)
			}
		}
		hs.APIs = apis
		c.Write(wire.AppendResponse(nil, h.CorrelationID, 0, hs))
		io.Copy(io.Discard, c) // until the client hangs up
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cfg := Config{Brokers: []string{ln.Addr().String()}, Username: "app", Password: "pw", RetryAttemptsMax: 1}.withDefaults()
	_, err = dialConn(ctx, &cfg, ln.Addr().String())
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("dial of a node without Authenticate: %v, want ErrUnsupported", err)
	}
	<-served
}
