package segment_test

import (
	"testing"

	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/enginetest"
	"github.com/corestream/corestream/segment/vfs"
)

func TestPwriteConformance(t *testing.T) {
	enginetest.Run(t, func(*testing.T) segment.Engine { return segment.NewPwriteEngine() })
}

func TestDefaultEngine(t *testing.T) {
	if e, why := segment.DefaultEngine(vfs.NewMem()); e.Name() != "pwrite" || why == nil {
		t.Fatalf("in-memory FS got %s (%v)", e.Name(), why)
	}
	e, why := segment.DefaultEngine(vfs.OS())
	t.Logf("OS file system: %s (fallback reason: %v)", e.Name(), why)
	if (why == nil) != (e.Name() == "io_uring") {
		t.Fatalf("engine %s with fallback reason %v", e.Name(), why)
	}
	e.Close()
}
