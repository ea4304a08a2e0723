// Package threadbench holds the experiments behind the threading decision
// recorded in docs/design/threading.md: three prototype servers that differ
// only in where partition work runs, measured with the same client.
//
//   - A: each gnet event loop is the shard; partition work runs on the loop
//     thread, engine completions reach the loop through a side poller that
//     calls EventLoop.Execute.
//   - B: a shard goroutine beside each gnet loop (the shard package's own
//     epoll loop); the gnet loops only frame bytes and hand requests over.
//   - C: no gnet; the shard's own epoll loop also owns the sockets.
//
// The experiments are benchmarks in this package's tests:
//
//	go test ./netio/internal/threadbench -run '^$' -bench . -benchtime 20000x
//
// They report round-trip percentiles (p50-µs, p99-µs) for a tiny request
// served on the receiving shard ("same"), on the other shard ("other"), or
// acknowledged after an asynchronous engine completion ("io"), and MB/s for
// pipelined 64 KiB requests against a plain Go socket blast in the same run.
// BenchmarkRoundTripUring runs prototype C with the real io_uring engine.
package threadbench
