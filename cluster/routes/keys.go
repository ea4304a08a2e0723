// Package routes is what this node knows and tells of where partitions
// are served: the route table (each partition's primary, generation and
// in-sync set), the router that writes it from the local replicas and
// announces the routes this node leads, the lag table behind the in-sync
// rule, and the View, the immutable copy of the applied metadata that
// every shard reads without locks.
//
// It is a part of the control plane: it imports the leaves below it
// (metadata, peerwire, the replicas) and no other part; the liveness
// signal and the transport come in through its ports, Liveness and
// Announcer.
package routes

import "github.com/corestream/corestream/shard"

// Key is the partition key of partition p of topic id: the key of its
// consensus group, its replica and its route.
func Key(id [16]byte, p int32) [20]byte { return shard.PartitionKey(id, uint32(p)) }
