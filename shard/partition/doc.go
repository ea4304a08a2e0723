// Package partition is one partition replica on the shard that owns it:
// its segment log, its consensus group (raftlite), the idempotent-producer
// table, the produce requests waiting for their commit and the fetches
// waiting for data. Everything here runs on the owning shard's thread; the
// node layer reaches a replica only through that shard (shard.Call and
// friends), so nothing in this package locks.
//
// How a produce travels inside a replica:
//
//	Produce ──▶ checks (route, batch, producer sequence)
//	        ──▶ raft.Propose ──▶ Ready: append to the log (stamp offset and
//	            term), send MsgApps ──▶ the log's group commit makes it
//	            durable ──▶ Durable(offset) ──▶ raft commit ──▶ answer
//
// The commit index is the high watermark: consumers see only committed
// batches. On a single node the group has one member and commits as soon
// as its own write is durable under the fsync policy.
//
// A partition group's members can change (membership.go): the primary
// adds a learner, promotes it once caught up, removes a member, one change
// at a time; each change is a configuration entry in the log, a control
// batch the segment log marks, so that a restart finds the configuration
// in the log (docs/design/consensus.md, Wiring).
//
// "Durable" follows storage.fsync: under always it is the log's durable
// offset (fdatasync done); under interval, messages and never it is the
// written offset (in the page cache), which survives a process crash but
// not a power loss — the documented meaning of those policies.
package partition
