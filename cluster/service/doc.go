// Package service is the broker's one typed service: produce, fetch,
// list offsets, metadata and the admin calls, in Go types, with errors
// as kinds rather than protocol codes. Every front end calls it: the
// native binary protocol and the HTTP API today, the Kafka listener
// next. A front end decodes its protocol into these requests, calls the
// service, and encodes the results and errors in its own protocol; it
// holds no business rule of its own, so the front ends cannot drift
// apart.
//
//	native protocol ─┐
//	HTTP API ────────┼──► Service ──► replicas (shard/partition, on their shards)
//	Kafka listener ──┘       │
//	                         └──────► metadata controller (on its shard)
//
// # Threads
//
// The broker runs thread-per-core: a partition belongs to one shard
// goroutine, the metadata controller to another. The service keeps that
// model and says, on every call, where it runs:
//
//   - Data calls (Produce, Fetch, ListOffsets, DescribePartition) run on
//     the shard that owns the partition, and admin calls on the
//     controller's shard. They are asynchronous: the caller passes its
//     own shard (from) and a completion (done) that the service calls
//     exactly once, on from. When the caller is not a shard goroutine
//     (an HTTP handler), from is nil and done runs on the serving shard:
//     it must not block (send to a buffered channel). An error found
//     before the call leaves the caller is answered at once, on the
//     caller's goroutine, before the call returns.
//   - Read-only metadata calls (Metadata, ListTopics, DescribeTopic,
//     ClusterStatus, Brokers, Identity) and InitProducer are synchronous
//     and safe on any goroutine: they read the node's published view and
//     route table.
//
// # Errors
//
// Every error the service returns is an *Error whose Kind is one of the
// sentinels of this package or of shard/partition (ErrorKinds lists
// them all). A front end maps each kind onto its protocol's code in one
// table, tested to cover ErrorKinds; it must not parse messages.
package service
