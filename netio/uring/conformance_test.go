package uring_test

import (
	"errors"
	"testing"

	"github.com/corestream/corestream/netio/uring"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/enginetest"
	"github.com/corestream/corestream/segment/vfs"
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

// ForFS refuses a file system without descriptors, and on the OS's file
// system gives io_uring exactly when the kernel allows it.
func TestForFS(t *testing.T) {
	if e, err := uring.ForFS(vfs.NewMem()); e != nil || err == nil {
		t.Fatalf("in-memory FS: engine %v, reason %v", e, err)
	}
	e, err := uring.ForFS(vfs.OS())
	t.Logf("OS file system: engine %v (reason: %v)", e != nil, err)
	if (err == nil) != (uring.Available() == nil) || (e != nil) != (err == nil) {
		t.Fatalf("engine %v with reason %v; Available: %v", e, err, uring.Available())
	}
	if e != nil {
		e.Close()
	}
}
