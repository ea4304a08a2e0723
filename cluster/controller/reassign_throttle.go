package controller

import "github.com/corestream/corestream/cluster/metadata"

// The catch-up throttle (issue 16): every node bounds the bytes its
// primaries send to learners, the new replicas of replica moves, with one
// token bucket (partition.Throttle) that raftlite asks before each append
// with entries to a learner. Its rate is
// cluster.reassign_throttle_bytes_per_second, or, while moves that asked
// for one (`--throttle` on a plan) are in progress, the smallest they
// asked for: a throttle follows the moves in the metadata, so every
// primary applies it without being told, a new primary included.

// ThrottleRate is the rate the moves in v ask for, else configured.
// Pure.
func ThrottleRate(moves []*metadata.Reassignment, configured int64) int64 {
	rate := int64(0)
	for _, mv := range moves {
		if t := mv.ThrottleBytesPerSecond; t > 0 && (rate == 0 || t < rate) {
			rate = t
		}
	}
	if rate == 0 {
		return configured
	}
	return rate
}
