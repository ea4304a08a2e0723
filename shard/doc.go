// Package shard is corestream's thread-per-core runtime.
//
// A Group holds one Shard per core. Each Shard is a goroutine locked to an
// OS thread (pinned to a CPU with Config.PinCores) that owns a disjoint set
// of partitions — their logs, their consensus groups, the connections
// homed on it, its io_uring write Engine — and touches them alone, so they
// need no locks. ShardForPartition maps a partition to its shard with
// xxhash; the mapping is stable for a given shard count.
//
// # The loop
//
// A shard runs rounds: a bounded batch of inbox messages, every Call reply,
// due timers, functions deferred with Defer, then it submits what the round
// queued on its Engine and dispatches completions already there. When a
// round finds nothing to do it parks in epoll_wait on one set holding
//
//	inbox eventfd   written by a poster only if the shard is parked
//	timerfd         armed to the timer wheel's next deadline
//	engine eventfd  signalled by the kernel on io_uring completions
//	watched fds     sockets and listeners registered by netio (Watch)
//
// An idle shard therefore blocks and costs nothing; it never spins unless
// Config.SpinIdle asks, and never calls runtime.Gosched on its locked
// thread (which would cost two thread wake-ups to get the P back).
//
// # Messages
//
// Post queues a function on a shard from any goroutine through a bounded
// multi-producer single-consumer ring (Inbox). A full inbox refuses the
// poster with ErrInboxFull instead of blocking it: shards post to each
// other, and two shards blocked on each other's full inbox would deadlock.
// Call runs a function on another shard and its continuation back on the
// caller's shard; its reply travels through a second inbox whose capacity
// is reserved when the call is made, so a reply is never refused. Do is
// for goroutines that are not shards (control plane, tests) and waits.
//
// # Time
//
// Timers live in a hierarchical timing wheel (Wheel) driven by the shard's
// clock, which tests replace (Config.Clock).
//
// docs/design/threading.md tells how a request travels through shards and
// netio, with the measurements behind the design.
package shard
