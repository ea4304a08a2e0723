// Package client is corestream's Go SDK: a Client that keeps pipelined
// connections to the broker nodes and a metadata cache, a batching idempotent
// Producer, a Consumer of assigned partitions, and the admin calls.
//
//	c, err := client.Dial(ctx, "127.0.0.1:7070")
//	p, err := c.NewProducer(ctx, client.ProducerConfig{})
//	p.ProduceAsync(ctx, client.Record{Topic: "orders", Key: k, Value: v}, callback)
//	p.Flush(ctx)
//
//	cs, err := c.NewConsumer(client.ConsumerConfig{Name: "billing"})
//	cs.Assign(ctx, "orders", nil, client.StartCommitted(client.StartEarliest))
//	recs, err := cs.Poll(ctx)
//	cs.Commit(ctx)
//
// # Routing
//
// Every data request (produce, fetch, list offsets) goes to its
// partition's primary and carries the route the metadata gave: the topic
// id (so a request meant for a deleted topic can never act on a new topic
// of the same name) and the generation (the primary's term). The client
// follows the rules of docs/protocol.md: a NOT_PRIMARY hint is applied and
// the request resent at once; every other error that may mean the route is
// wrong (STALE_GENERATION, UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS,
// a failed or timed-out connection, ...) refreshes the metadata first, at
// most one refresh per Config.MetadataRefreshBackoff shared by every
// failure before it; BUSY backs off, honouring retry_after_ms. Metadata
// answers from nodes that see the metadata quorum are trusted; a cut-off
// node's partial view is only merged, never allowed to hide a usable route.
// Retries are bounded (Config.RetryAttemptsMax; a producer's by its
// DeliveryTimeout) and happen under the caller's context; the caller sees
// only the final outcome. The metadata is also refreshed every
// Config.MetadataMaxAge.
//
// # Connections
//
// One TCP connection per node carries its requests, pipelined (and, for
// produce, fetch and list-offsets requests to a node that serves Home, one
// connection per shard of the node, moved to the shard that owns their
// partitions: home.go; Config.SingleConnPerNode turns that off):
// requests are matched to responses by correlation id (responses may come
// back in any order), a writer goroutine gathers queued frames into one
// writev (a request sent on an idle connection is written by its sender at
// once: conn.go), a reader goroutine dispatches responses, and at most
// Config.InFlightPerConnMax requests are in flight. Every call honours its
// context: when it ends the caller returns at once and the late response
// is dropped. A broken connection fails its requests with
// ErrConnectionLost and is re-dialled on next use, with backoff. A request
// unanswered past Config.RequestTimeout (plus a margin) fails its whole
// connection with ErrRequestTimeout: a hung node keeps its socket open.
//
// # Errors
//
// Errors from brokers are the wire table's: errors.Is(err,
// wire.ErrTopicAlreadyExists), and errors.As(err, &er) with a
// *wire.ErrorResponse for the broker's message. The client's own sentinels
// are in errors.go.
//
// docs/client.md is the guide, with the producer's delivery and retry
// rules in full.
package client
