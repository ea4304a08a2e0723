package node

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// joinCoordinated sends join until the group's coordinator answers it:
// the first group request of a cluster creates the internal topic, and
// a node that just became a partition's primary loads it first
// (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE meanwhile).
func joinCoordinated(ctx context.Context, t *testing.T, join *kmsg.JoinGroupRequest, cl kmsg.Requestor) (*kmsg.JoinGroupResponse, error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		jr, err := join.RequestWith(ctx, cl)
		if err != nil || time.Now().After(deadline) {
			return jr, err
		}
		switch jr.ErrorCode {
		case kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code:
		default:
			return jr, err
		}
		select {
		case <-ctx.Done():
			return jr, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}
