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
//
// Inside cluster/ the same rule holds a second time, per part: a package
// stands in one part folder (cluster/X and what is under it) and may
// import its own part and parts on lower cluster floors, never one on its
// own floor or above. So no front end imports another, no part imports
// a front end, and no part below the node reaches the composition root.
// The parts stand above the front ends because they may use the typed
// service's types (its requests and error kinds) and peerwire; the
// transport and the controller's drivers stand above the routes, whose
// table the one feeds and the other reads:
//
//	6  node                        (the composition root, the replica host, reconciliation)
//	5  transport  controller       (the peer transport: TCP links, liveness, its ports;
//	                               the controller's drivers: balancer, moves, drains)
//	4  routes                      (the route table, the router and the View)
//	3  native  httpapi  kafka      (the front ends)
//	2  service  frontend           (the one typed service and its wire codes;
//	                                what every front end shares on the data path)
//	1  metadata                    (the metadata state machine)
//	0  balance clock config forward groups history peerauth peerwire placement
//	   security tlsbridge txns     (leaves)
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

// ClusterFloors maps each part folder of cluster/ to its floor inside
// cluster/ (see the package doc). A package under cluster/ whose part has
// no floor here is refused until it is given one.
var ClusterFloors = map[string]int{
	"cluster/balance":    0,
	"cluster/clock":      0,
	"cluster/config":     0,
	"cluster/forward":    0,
	"cluster/groups":     0,
	"cluster/history":    0,
	"cluster/peerauth":   0,
	"cluster/peerwire":   0,
	"cluster/placement":  0,
	"cluster/security":   0,
	"cluster/tlsbridge":  0,
	"cluster/txns":       0,
	"cluster/metadata":   1,
	"cluster/service":    2,
	"cluster/frontend":   2,
	"cluster/native":     3,
	"cluster/httpapi":    3,
	"cluster/kafka":      3,
	"cluster/routes":     4,
	"cluster/transport":  5,
	"cluster/controller": 5,
	"cluster/node":       6,
}

// FrontEnds are the cluster parts that speak a protocol to clients. Only
// the composition root (ComposedBy) imports them: a part above them on
// the floors may use what is below the front ends, never a front end
// itself, so the parts stay the same whichever protocols a node serves.
var FrontEnds = []string{"cluster/native", "cluster/httpapi", "cluster/kafka"}

// ComposedBy is the part that builds and wires every other one: the only
// importer of the front ends.
const ComposedBy = "cluster/node"

// Exceptions are the non-test imports the rules refuse and the tree still
// makes, each named with its reason and the way out. The test fails on an
// exception that no file needs any more, so the list only shrinks.
var Exceptions = []struct {
	From, To, Why string
}{
	{"cluster/metadata", "netio/wire", "the metadata state machine checks topic names with the protocol's rule (wire.ValidateTopicName) " +
		"and answers its error; the rule belongs in metadata and the wire should take it from there (issue 30)"},
}

// ProtocolFree are the cluster floors whose packages may not import a
// protocol (netio/wire and what is under it, but for the SCRAM
// algorithm, netio/wire/scram, which is no protocol): the leaves and the
// metadata state machine speak no protocol; the service and above map
// their answers onto one.
const ProtocolFree = 1

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
