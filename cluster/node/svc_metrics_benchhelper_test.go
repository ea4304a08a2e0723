package node

import "github.com/corestream/corestream/cluster/clock"

func newSvcMeterForBench() *svcMeter { return newSvcMeter(clock.Real()) }
