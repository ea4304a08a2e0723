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

// MetaTopicID names the metadata group's log; no client topic can have it
// (topic ids are random version-4 UUIDs, whose version nibble is 4).
var MetaTopicID = [16]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// MetaKey is the metadata group's partition key: Key(MetaTopicID, 0).
var MetaKey = Key(MetaTopicID, 0)

// MetaShard is the shard that hosts the metadata group and the
// controller; the transport's control frames (pings, route
// announcements, transfers, replica moves) go on its link 0, which this
// shard owns at both ends.
const MetaShard = 0
