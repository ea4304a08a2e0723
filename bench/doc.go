// Package bench is corestream's load generator and its reports: the same
// workload against corestream and against a peer broker, latency
// percentiles from HDR histograms, and the physical limits of the machine
// measured in the same run.
//
// # Pieces
//
//   - Spec (spec.go) is a workload: produce, consume or e2e; producers,
//     consumers, message size, batching, acks, count or duration, rate,
//     warm-up. Its flags are shared by every load generator binary.
//   - System (system.go) is what a workload runs against. Corestream
//     (corestream.go) drives the Go SDK; the peer driver for NATS
//     JetStream lives in the separate module under bench/peer so that the
//     main module never depends on NATS.
//   - Run (run.go) drives a System with a Spec and returns a Report
//     (report.go): per-actor and total messages/s, bytes/s and latency
//     percentiles, the machine (machine.go) and the parameters.
//   - The limit probes (probe.go) measure a plain TCP blast over loopback
//     and sequential write + fdatasync on a directory's file system.
//   - Compare (compare.go) is `make bench-compare`: it launches each system
//     on loopback (launch.go), runs each scenario's workload as a separate
//     load-generator process against both, and prints one table of
//     ratios corestream / peer and fractions of the machine's limits.
//
// # How figures are taken
//
// Every message carries, in its first 16 bytes, the time it was meant to
// be sent (nanoseconds since the run's start, on the monotonic clock) and
// its producer and sequence number. Produce latency runs from the produce
// call (or, under a rate limit, from the intended send time, so a stalled
// broker cannot hide its stall: no coordinated omission) to the
// acknowledgement; end-to-end latency runs from the same instant to the
// consumer's receipt, in the same process. Latency covers the messages
// meant to be sent after the warm-up, whenever they complete.
//
// Throughput depends on how the run is bounded. With --duration it is the
// completions (acknowledgements, receipts) that happen inside the measured
// window, over the window: the steady state, even for a system so far
// behind that nothing sent in the window completes within it. With
// --messages it is the measured messages (those sent after the warm-up)
// over the time from the warm-up's end to the last of them completing.
package bench
