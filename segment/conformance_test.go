package segment_test

import (
	"testing"

	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/segment/enginetest"
)

func TestPwriteConformance(t *testing.T) {
	enginetest.Run(t, func(*testing.T) segment.Engine { return segment.NewPwriteEngine() })
}
