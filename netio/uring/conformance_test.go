package uring_test

import (
	"errors"
	"testing"

	"github.com/corestream/corestream/netio/uring"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/enginetest"
)

// The engine satisfies the log's interface without importing it.
var _ segment.Engine = (*uring.Engine)(nil)

// Every write goes to the ring in the "ring" variants; small writes without
// a sync are made inline in the others.
func TestConformance(t *testing.T) {
	for _, v := range []struct {
		name          string
		depth, inline int
	}{{"depth4-ring", 4, -1}, {"depth4", 4, 0}, {"default-ring", 0, -1}, {"default", 0, 0}} {
		t.Run(v.name, func(t *testing.T) {
			enginetest.Run(t, func(t *testing.T) segment.Engine {
				e, err := uring.NewEngine(uring.Options{QueueDepth: v.depth, InlineWriteMax: v.inline})
				if errors.Is(err, uring.ErrUnavailable) {
					t.Skip(err)
				}
				if err != nil {
					t.Fatal(err)
				}
				return e
			})
		})
	}
}
