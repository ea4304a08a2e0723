# corestream — build, test and measure.
#
# Every target works on a fresh machine with Go on PATH (see .ci/run).

GO       ?= go
BIN      ?= bin
PKGS     ?= ./...
FUZZTIME ?= 10s
SEEDS    ?= 20000

.PHONY: all build run test test-race bench fuzz lint sim sim-cluster sim-data sim-node sim-node-groups cluster chaos clean

all: build

# VERSION is what `corestream --version` prints: the checkout's git
# describe (a tag, commits since it and the revision; -dirty with local
# changes). Without git the binary falls back to the revision the Go
# toolchain recorded, else "unknown".
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)
LDFLAGS  = -ldflags "-X main.version=$(VERSION)"

## build: compile the corestream binary into ./bin
build:
	$(GO) build $(LDFLAGS) -o $(BIN)/corestream ./cmd/corestream

## run: a single node on embedded defaults (data in ./data, 127.0.0.1:7070)
run: build
	./$(BIN)/corestream serve

## test: vet, then every test (unit, simulation seeds, end-to-end), the
## failures listed again at the end; the
## NATS side of the bench is its own module (bench/peer) and imports the
## bench package, so it is vetted too: a dependency the bench gains must
## reach its go.sum as well.
test:
	$(GO) vet $(PKGS)
	cd bench/peer && $(GO) vet ./...
	@out=$$(mktemp); { $(GO) test -count=1 -timeout 15m $(PKGS) 2>&1; echo $$? > $$out.rc; } | tee $$out; \
	rc=$$(cat $$out.rc); if [ "$$rc" != 0 ]; then echo "== the failures, again (the nodes' logs above can bury them):"; \
	grep -E '^[[:space:]]*--- FAIL|^FAIL|^panic:|test timed out' $$out; fi; rm -f $$out $$out.rc; exit $$rc

## test-race: the unit tests under the race detector
test-race:
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

## bench: the package benchmarks (figures go to BENCHMARKS.md)
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count=1 -timeout 30m $(PKGS)

## fuzz: each fuzz target for FUZZTIME
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$f"; \
	    $(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 5s -parallel 1 $$pkg; \
	  done; \
	done

## sim: the raftlite simulator over SEEDS seeds with long schedules; a
## failure prints its seed and the one command that replays it
sim:
	$(GO) test ./raftlite/rafttest -run 'TestSim$$' -seeds=$(SEEDS) -long -count=1 -timeout 3h -v

## sim-cluster: the control-plane simulator (cluster/node) over SEEDS
## seeds of 3- and 5-node clusters, or of SIM_NODES nodes (32 is the
## roster limit); a failure prints its seed and the one command that
## replays it
SIM_NODES ?= 0
sim-cluster:
	$(GO) test ./cluster/node -run 'TestSimCluster$$' -count=1 -timeout 3h -v -sim.seeds=$(SEEDS) -sim.nodes=$(SIM_NODES)

## sim-data: the data-path simulator (cluster/node: real shards, replicas,
## segment logs on in-memory FSes and the service, clients producing and
## reading) over SEEDS seeds of 3- and 5-node clusters, or of SIM_NODES
## nodes; a failure prints its seed and the one command that replays it
sim-data:
	$(GO) test ./cluster/node -run 'TestSimData$$' -count=1 -timeout 3h -v -simdata.seeds=$(SEEDS) -simdata.nodes=$(SIM_NODES)

## sim-node: the whole-node simulator (cluster/node: each node built by
## its own composition root on a stepped shard group, an in-memory FS and
## a simulated network; topics created and deleted through the service
## while clients produce) over SEEDS seeds of 3- and 5-node clusters, or
## of SIM_NODES nodes; a failure prints its seed and the one command that
## replays it
sim-node:
	$(GO) test ./cluster/node -run 'TestSimNode$$' -count=1 -timeout 3h -v -simnode.seeds=$(SEEDS) -simnode.nodes=$(SIM_NODES)

## sim-node-groups: the whole-node simulator's consumer-group scenario
## (members joining, syncing, heartbeating and committing across
## coordinator failovers, docs/design/groups.md) over SEEDS seeds.
sim-node-groups:
	$(GO) test ./cluster/node -run 'TestSimNodeGroups$$' -count=1 -timeout 3h -v -simnode.groups-seeds=$(SEEDS) -simnode.nodes=$(SIM_NODES)

## lint: gofmt and vet
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

## bench-kafka: the Kafka port with franz-go against the native port with
## the Go SDK, both from this process against a `corestream serve` process
## of its own (one shard, fsync never), same workload (1 KiB records, 64 KiB
## batches, 5 ms linger, acks quorum), KAFKA_BENCH_COUNT runs of
## KAFKA_BENCH_RECORDS records; prints the load average, the medians and
## ranges of records/s and of the node's and the client's CPU per record
## (the node's read from /proc), and the Kafka/native ratios (BENCHMARKS.md,
## "The Kafka port"). KAFKA_BENCH_CPUPROFILE=FILE also profiles the node;
## KAFKA_BENCH_SHARDS=2 gives the node two shards, KAFKA_BENCH_PARTITIONS=4
## the topic four partitions.
KAFKA_BENCH_COUNT      ?= 3
KAFKA_BENCH_RECORDS    ?= 1000000
KAFKA_BENCH_SHARDS     ?= 1
KAFKA_BENCH_PARTITIONS ?= 1
.PHONY: bench-kafka
bench-kafka: build
	@mkdir -p bench/.out
	@echo "load average before: $$(cut -d' ' -f1-3 /proc/loadavg), $$(nproc) CPUs"
	CORESTREAM_BENCH_BIN=$(abspath $(BIN))/corestream CORESTREAM_BENCH_CPUPROFILE=$(KAFKA_BENCH_CPUPROFILE) CORESTREAM_BENCH_SHARDS=$(KAFKA_BENCH_SHARDS) \
	  CORESTREAM_BENCH_PARTITIONS=$(KAFKA_BENCH_PARTITIONS) \
	  $(GO) test ./bench -run '^$$' -bench KafkaPort -benchtime $(KAFKA_BENCH_RECORDS)x -count $(KAFKA_BENCH_COUNT) -timeout 30m \
	  | grep -E '^(Benchmark|goos|goarch|cpu|ok|FAIL)' | tee bench/.out/kafka.txt
	@echo "load average after: $$(cut -d' ' -f1-3 /proc/loadavg)"
	@awk -f bench/kafka_summary.awk bench/.out/kafka.txt

## bench-peer: install the peer broker (nats-server) from the Go module
## proxy and build its load generator (module bench/peer) into bench/.bin
NATS_SERVER_VERSION ?= v2.15.2
BENCH_BIN           ?= bench/.bin
.PHONY: bench-peer bench-compare
bench-peer:
	GOBIN=$(abspath $(BENCH_BIN)) $(GO) install github.com/nats-io/nats-server/v2@$(NATS_SERVER_VERSION)
	cd bench/peer && $(GO) build -o $(abspath $(BENCH_BIN))/peerbench .

## bench-compare: corestream and NATS JetStream side by side on loopback,
## with the machine's limits, in one table (BENCHMARKS.md). BENCH_FLAGS
## adds flags (--only, --duration); BENCH_CLUSTER_CMD starts the 3-node
## corestream clusters ({nodes} {dir} {fsync} {shards} are filled in).
BENCH_FLAGS       ?=
BENCH_CLUSTER_CMD ?= $(abspath $(BIN))/localcluster -n {nodes} -dir {dir} -fsync {fsync} -shards {shards} -k 0 -bin $(abspath $(BIN))/corestream -log-level warn
bench-compare: build bench-peer
	$(GO) build -o $(BIN)/localcluster ./tools/localcluster
	@mkdir -p bench/.out
	./$(BIN)/corestream bench compare --peer-bench $(BENCH_BIN)/peerbench --nats-server $(BENCH_BIN)/nats-server \
	  --dir bench/.out/run --json bench/.out/compare.json --cluster-cmd '$(BENCH_CLUSTER_CMD)' $(BENCH_FLAGS)

## cluster: NODES nodes on loopback (tools/localcluster), each with its own
## data directory and free ports; prints them as JSON; Ctrl-C stops them.
## CLUSTER_FLAGS adds launcher flags, e.g. "-rf 2 -k 2 -dir ./cluster".
## The JSON document is all that goes to standard output (the recipe is
## silent, builds report on standard error), so `make cluster | jq` works.
NODES         ?= 3
CLUSTER_FLAGS ?=
cluster:
	@echo "building $(BIN)/corestream and $(BIN)/localcluster" >&2
	@$(GO) build $(LDFLAGS) -o $(BIN)/corestream ./cmd/corestream >&2
	@$(GO) build -o $(BIN)/localcluster ./tools/localcluster >&2
	@$(BIN)/localcluster -n $(NODES) -bin $(BIN)/corestream $(CLUSTER_FLAGS)

## chaos: the fault harness (tools/chaos) for DURATION against a 3-node
## cluster of real processes: kill -9, SIGSTOP/SIGCONT and loopback
## partitions (root and iptables; skipped with a message otherwise), then
## every acknowledged write and every replica checked; unavailability per
## fault kind printed (BENCHMARKS.md). SEED= replays a schedule;
## CHAOS_FLAGS adds flags (-strict fails on the 2 s target, -json FILE).
DURATION    ?= 5m
SEED        ?= 0
CHAOS_FLAGS ?=
chaos: build
	$(GO) build -o $(BIN)/chaos ./tools/chaos
	./$(BIN)/chaos -bin $(abspath $(BIN))/corestream -duration $(DURATION) -seed $(SEED) $(CHAOS_FLAGS)

clean:
	rm -rf $(BIN)
