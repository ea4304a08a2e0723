package nodesvc

import (
	"testing"

	"github.com/corestream/corestream/cluster/clock"
	"github.com/corestream/corestream/cluster/service"
)

// BenchmarkMeterProduce is what metering adds to one produce: the
// wrapped callback, the clock read at the call and at the answer, and
// the histogram observation.
func BenchmarkMeterProduce(b *testing.B) {
	s := New(Deps{Meter: NewMeter(clock.Real())})
	done := func(service.ProduceResult, error) {}
	b.ReportAllocs()
	for b.Loop() {
		s.meterProduce(100, done)(service.ProduceResult{}, nil)
	}
}
