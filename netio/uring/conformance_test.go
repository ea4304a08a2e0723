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

func TestConformance(t *testing.T) {
	for _, depth := range []int{4, uring.QueueDepthDefault} {
		t.Run(map[int]string{4: "depth4", uring.QueueDepthDefault: "default"}[depth], func(t *testing.T) {
			enginetest.Run(t, func(t *testing.T) segment.Engine {
				e, err := uring.NewEngine(uring.Options{QueueDepth: depth})
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
