package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/client/clienttest"
	"github.com/corestream/corestream/netio/wire"
)

// Two requests pipelined on one connection: the first one's response is
// held by the broker, the second answers first; both complete correctly.
func TestPipelinedOutOfOrderResponses(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 2})
	e.produceN(e.producer(clientProducerManual()), "t", 1, 3)
	hold := make(chan struct{})
	f := e.fc.AddFault(clienttest.Fault{APIs: []wire.APIKey{wire.APIListOffsets}, Partitions: []int32{0}, Hold: hold, Times: 1})
	type res struct {
		off int64
		err error
	}
	first := make(chan res, 1)
	go func() {
		r, err := e.c.ListOffsets(e.ctx, "t", 0, wire.TimestampLatest)
		first <- res{r.Offset, err}
	}()
	waitFor(t, "the held request to arrive", func() bool { return f.Hits() == 1 })
	r, err := e.c.ListOffsets(e.ctx, "t", 1, wire.TimestampLatest)
	if err != nil || r.Offset != 3 {
		t.Fatalf("second request: offset %d, %v; want 3", r.Offset, err)
	}
	select {
	case got := <-first:
		t.Fatalf("held request completed before release: %+v", got)
	default:
	}
	close(hold)
	got := <-first
	if got.err != nil || got.off != 0 {
		t.Fatalf("first request: offset %d, %v; want 0", got.off, got.err)
	}
	if n := e.fc.Connections(1); n != 1 {
		t.Fatalf("%d connections, want the one pipelined connection", n)
	}
}

// A caller whose context ends gets its error at once; the late response
// is dropped and the connection keeps serving.
func TestContextCancellationDropsLateResponse(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 1})
	hold := make(chan struct{})
	f := e.fc.AddFault(clienttest.Fault{APIs: []wire.APIKey{wire.APIListOffsets}, Hold: hold, Times: 1})
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() {
		_, err := e.c.ListOffsets(ctx, "t", 0, wire.TimestampEarliest)
		done <- err
	}()
	waitFor(t, "the held request", func() bool { return f.Hits() == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	close(hold) // the late answer arrives and must be dropped
	r, err := e.c.ListOffsets(e.ctx, "t", 0, wire.TimestampLatest)
	if err != nil || r.Offset != 0 {
		t.Fatalf("after cancellation: %+v, %v", r, err)
	}
	if n := e.fc.Requests(1, wire.APIHandshake); n != 1 {
		t.Fatalf("%d handshakes: the connection was replaced", n)
	}
}

// A dropped connection is re-dialled (with a new handshake) and the
// request retried transparently.
func TestReconnectAfterDroppedConnection(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 1})
	if _, err := e.c.ListOffsets(e.ctx, "t", 0, wire.TimestampLatest); err != nil {
		t.Fatal(err)
	}
	e.fc.DropConnections(0)
	e.fc.AddFault(clienttest.Fault{APIs: []wire.APIKey{wire.APIListOffsets}, Close: true, Times: 1})
	if _, err := e.c.ListOffsets(e.ctx, "t", 0, wire.TimestampLatest); err != nil {
		t.Fatalf("request after drops: %v", err)
	}
	if n := e.fc.Requests(1, wire.APIHandshake); n < 2 {
		t.Fatalf("%d handshakes, want a reconnect", n)
	}
}

// BUSY with retry advice is retried until it passes.
func TestBusyIsRetried(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 1})
	f := e.fc.AddFault(clienttest.Fault{APIs: []wire.APIKey{wire.APIListOffsets}, Err: clienttest.Busy(1), Times: 3})
	start := time.Now()
	if _, err := e.c.ListOffsets(e.ctx, "t", 0, wire.TimestampLatest); err != nil {
		t.Fatal(err)
	}
	if f.Hits() != 3 {
		t.Fatalf("fault hit %d times, want 3", f.Hits())
	}
	if time.Since(start) < 3*time.Millisecond {
		t.Fatalf("retried without honouring retry_after_ms")
	}
}

// A non-retriable error comes back at once with the broker's message.
func TestNonRetriableErrorKeepsMessage(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 1})
	_, err := e.c.ListOffsets(e.ctx, "t", 0, -7)
	var er *wire.ErrorResponse
	if !errors.Is(err, wire.ErrInvalidTimestamp) || !errors.As(err, &er) || er.Message == "" {
		t.Fatalf("got %v, want INVALID_TIMESTAMP with a message", err)
	}
}

// Retries are bounded.
func TestRetriesAreBounded(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 1})
	e.fc.AddFault(clienttest.Fault{APIs: []wire.APIKey{wire.APIListOffsets}, Err: clienttest.Busy(0)})
	_, err := e.c.ListOffsets(e.ctx, "t", 0, wire.TimestampLatest)
	if !errors.Is(err, wire.ErrBusy) {
		t.Fatalf("got %v, want the last BUSY", err)
	}
	if n := e.fc.Requests(1, wire.APIListOffsets); n != 10 {
		t.Fatalf("%d attempts, want RetryAttemptsMax = 10", n)
	}
}

// Closing the client fails calls with ErrClosed.
func TestClosedClient(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 1})
	e.c.Close()
	if _, err := e.c.ListOffsets(e.ctx, "t", 0, wire.TimestampLatest); err == nil {
		t.Fatal("request on a closed client succeeded")
	}
}

// A request that is never answered on a connection that stays open (a
// hung node) fails the connection after the request timeout plus its
// margin, with ErrRequestTimeout; the retry goes on a new connection.
// Before, the call waited for as long as the node hung.
func TestUnansweredRequestFailsConnection(t *testing.T) {
	e := newEnv(t, 1, map[string]int32{"t": 1}, func(c *client.Config) { c.RequestTimeout = 200 * time.Millisecond })
	never := make(chan struct{})
	defer close(never)
	held := e.fc.AddFault(clienttest.Fault{APIs: []wire.APIKey{wire.APIListTopics}, Hold: never, Times: 1})
	start := time.Now()
	if _, err := e.c.ListTopics(e.ctx); err != nil {
		t.Fatalf("the retry on a new connection failed: %v", err)
	}
	d := time.Since(start)
	// 200 ms plus max(200 ms / 8, 100 ms).
	if held.Hits() != 1 || d < 300*time.Millisecond || d > 3*time.Second {
		t.Fatalf("held %d requests; answered after %v, want about 300 ms", held.Hits(), d)
	}
	// The call itself, with nothing to retry it, reports the timeout.
	e.fc.AddFault(clienttest.Fault{APIs: []wire.APIKey{wire.APIListTopics}, Hold: never})
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	_, err := e.c.ListTopics(ctx)
	if !errors.Is(err, client.ErrRequestTimeout) || !errors.Is(err, client.ErrConnectionLost) {
		t.Fatalf("got %v, want ErrRequestTimeout on a lost connection", err)
	}
	t.Log(err)
}
