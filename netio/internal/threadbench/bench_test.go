package threadbench

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/corestream/corestream/netio/uring"
)

type proto struct {
	name  string
	start func() (server, error)
}

var protos = []proto{
	{"A-loop-is-shard", func() (server, error) { return startA(true) }},
	{"A-unlocked-diagnostic", func() (server, error) { return startA(false) }},
	{"B-shard-beside-loop", func() (server, error) { return startB(0) }},
	{"B-shard-beside-loop-spin20us", func() (server, error) { return startB(20 * time.Microsecond) }},
	{"C-own-epoll", func() (server, error) { return startC(0) }},
	{"C-own-epoll-spin20us", func() (server, error) { return startC(20 * time.Microsecond) }},
}

var rttCases = []struct {
	name   string
	op     byte
	target byte
}{
	{"same", opWork, targetSame},
	{"other", opWork, targetOther},
	{"io-same", opIO, targetSame},
	{"io-other", opIO, targetOther},
}

// BenchmarkRoundTrip: one connection, one tiny request at a time.
func BenchmarkRoundTrip(b *testing.B) {
	for _, p := range protos {
		for _, tc := range rttCases {
			b.Run(p.name+"/"+tc.name, func(b *testing.B) {
				srv, err := p.start()
				if err != nil {
					b.Fatal(err)
				}
				defer srv.Close()
				h, err := roundTrips(srv.Addr(), tc.op, tc.target, 500, b.N)
				if err != nil {
					b.Fatal(err)
				}
				reportHist(b, h)
			})
		}
	}
}

// BenchmarkRoundTripUring: prototype C with the real io_uring engine
// (netio/uring, created on the shard's locked thread with
// IORING_SETUP_SINGLE_ISSUER): a tiny request acknowledged after a 1 KiB
// write to a preallocated file completes ("never") or after the write and
// its linked fdatasync ("always"), on the receiving or the other shard.
func BenchmarkRoundTripUring(b *testing.B) {
	if err := uring.Available(); err != nil {
		b.Skip(err)
	}
	for _, k := range []struct {
		name string
		kind engineKind
	}{{"never", engineUringNever}, {"always", engineUringAlways}} {
		for _, tc := range []struct {
			name   string
			target byte
		}{{"same", targetSame}, {"other", targetOther}} {
			b.Run(k.name+"/"+tc.name, func(b *testing.B) {
				srv, err := startCWith(0, k.kind, b.TempDir())
				if err != nil {
					b.Fatal(err)
				}
				defer srv.Close()
				h, err := roundTrips(srv.Addr(), opIO, tc.target, 200, b.N)
				if err != nil {
					b.Fatal(err)
				}
				reportHist(b, h)
			})
		}
	}
}

const (
	bulkPayloadBytes = 64 << 10
	bulkWindow       = 32
)

// BenchmarkPipelined64K: one connection, 64 KiB requests, 32 unanswered at
// most. b.N is the number of frames per round; each of five rounds runs a
// plain Go socket blast of the same bytes and then the prototype, so each
// ratio compares runs made under the same load on a shared machine, and
// the medians are reported.
func BenchmarkPipelined64K(b *testing.B) {
	for _, p := range protos {
		for _, tc := range []struct {
			name   string
			target byte
		}{{"same", targetSame}, {"other", targetOther}} {
			b.Run(p.name+"/"+tc.name, func(b *testing.B) {
				frames := max(b.N, 256)
				srv, err := p.start()
				if err != nil {
					b.Fatal(err)
				}
				defer srv.Close()
				var rates, ratios []float64
				for round := 0; round < 5; round++ {
					base, err := blast(frames*bulkPayloadBytes, bulkPayloadBytes)
					if err != nil {
						b.Fatal(err)
					}
					bps, err := pipelined(srv.Addr(), tc.target, frames, bulkPayloadBytes, bulkWindow)
					if err != nil {
						b.Fatal(err)
					}
					rates, ratios = append(rates, bps), append(ratios, bps/base)
				}
				b.ReportMetric(median(rates)/1e6, "MB/s")
				b.ReportMetric(100*median(ratios), "%-of-blast")
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// TestPrototypesAnswer checks every prototype serves every request kind
// (a quick correctness check of the experiment itself).
func TestPrototypesAnswer(t *testing.T) {
	for _, p := range protos {
		t.Run(p.name, func(t *testing.T) {
			srv, err := p.start()
			if err != nil {
				t.Fatal(err)
			}
			defer srv.Close()
			for _, tc := range rttCases {
				if _, err := roundTrips(srv.Addr(), tc.op, tc.target, 0, 20); err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
			}
			if _, err := pipelined(srv.Addr(), targetOther, 64, 64<<10, 8); err != nil {
				t.Fatal(fmt.Errorf("pipelined: %w", err))
			}
		})
	}
}
