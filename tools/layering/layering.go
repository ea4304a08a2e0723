// Package layering states which package of the tree may import which, once,
// and its test holds every Go file to it.
//
// The tree is built in floors. A package may import packages of its own
// top-level folder and of any folder on a lower floor; never one above,
// and never a sibling folder on its own floor. Where a lower package needs
// something from above (the log an I/O engine, a replica the wire's error
// codes), it declares the interface or the type itself and a higher floor
// provides it: segment.Engine is implemented in netio/uring, and
// partition.Error kinds are mapped onto wire codes in cluster/native.
//
//	5  cmd
//	4  bench  tools
//	3  cluster  client  (the servers' control plane; the SDK, which
//	                     speaks only the protocol below it)
//	2  netio            (sockets, the io_uring ring, the native protocol)
//	1  shard            (the per-core runtime and the replicas it owns)
//	0  segment  raftlite   (pure: no sockets, no shards)
package layering

// Floors maps each top-level folder to its floor.
var Floors = map[string]int{
	"segment":  0,
	"raftlite": 0,
	"shard":    1,
	"netio":    2,
	"cluster":  3,
	"client":   3,
	"bench":    4,
	"tools":    4,
	"cmd":      5,
}

// TestExceptions are the imports a _test.go file may make up the floors,
// each with its reason: a test driving a package with the real
// implementation a higher floor gives it in production. Non-test files
// have no exceptions.
var TestExceptions = []struct {
	From, To, Why string
}{
	{"segment", "netio/uring", "the log is tested on the io_uring engine it runs on"},
	{"shard/partition", "netio/uring", "replicas are tested on the io_uring engine the node gives their shard"},
	{"cluster/node", "client", "whole nodes are driven by the Go SDK, as users drive them"},
}
