// Package controller holds the metadata controller's drivers and its
// admin calls: the primary balancer's driver (Balancer, one primary move
// at a time by the cluster/balance policy), the reassigner (Reassigner,
// replica moves and node drains, one membership step at a time, and the
// catch-up throttle's rule), the roster driver (RosterDriver, the
// metadata group's membership after each roster change), the topic and
// offset calls (Admin), and the controller's pure core (Core: committed
// metadata batches in, the applied state, results, View and readiness
// rule out). Each runs on shard routes.MetaShard, reads
// time only through a clock and arms timers on its owner, and reaches
// the rest of the node through the ports of its deps (BalancerDeps,
// ReassignDeps, RosterDeps, AdminDeps; Metadata, the controller's core
// as they read and propose to it; MetaGroup, the metadata group's
// replica), so the simulators drive the same code.
//
// It is a part of the control plane: it imports the leaves, the
// metadata, the service's types, the routes and the replicas' types
// below it, and no front end, no other part and not the node (the
// layering test holds that). The controller around its core (the
// metadata group it runs, its snapshot file, its readiness latch and its
// remaining admin answers) still lives in cluster/node
// (docs/design/node-parts.md says what moving them takes).
package controller
