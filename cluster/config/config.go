// Package config is the broker's configuration: the TOML schema, its
// embedded defaults, and validation that names the offending key.
//
// A node starts with no file at all (Default), and a file only overrides
// what it names. Every option is listed in docs/configuration.md with its
// default and bounds; TestEveryOptionDocumented keeps the two in step.
package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// Bounds that the validation enforces. Units are last in each name.
const (
	// RosterNodesMax is the largest cluster roster. Node ids are 1..32: an
	// id names one of the roster's slots (and a consensus member).
	RosterNodesMax = 32
	// ReplicationFactorMax is the largest replication factor of a topic.
	ReplicationFactorMax = 32
	// ShardsMax bounds shards per node.
	ShardsMax = 256
	// FrameBytesMin and FrameBytesMax bound network.max_frame_bytes.
	FrameBytesMin = 64 << 10
	FrameBytesMax = 256 << 20
	// BatchBytesMax bounds storage.max_batch_bytes (the record format's own
	// bound on one batch).
	BatchBytesMax = 16 << 20
	// WritebackBytesDefault is storage.writeback_bytes' default: without
	// it a fast producer left gigabytes dirty and each 1 GiB segment's
	// seal flushed them at once, with 100 ms intervals in which nothing
	// was acknowledged; with it the disk is written steadily (numbers in
	// docs/configuration.md).
	WritebackBytesDefault = 64 << 20
	// ReplicaConnectionsPerPeerMax bounds cluster.coordinator.replica_connections_per_peer.
	ReplicaConnectionsPerPeerMax = 64
)

// ErrInvalid wraps every validation error; the message names the key.
var ErrInvalid = errors.New("config")

// Config is the whole configuration of one node.
type Config struct {
	Node     Node     `toml:"node"`
	Shard    Shard    `toml:"shard"`
	Network  Network  `toml:"network"`
	Storage  Storage  `toml:"storage"`
	Cluster  Cluster  `toml:"cluster"`
	HTTP     HTTP     `toml:"http"`
	Log      Log      `toml:"log"`
	Security Security `toml:"security"`
}

// Node is this node's identity, addresses and data directory.
type Node struct {
	// ID is this node's id in the roster (1..RosterNodesMax).
	ID int `toml:"id"`
	// DataDir holds every partition directory and the node's state.
	DataDir string `toml:"data_dir"`
	// ClientAddr is where the client protocol listens.
	ClientAddr string `toml:"client_addr"`
	// ReplicationAddr is where peers connect for replication (clusters only).
	ReplicationAddr string `toml:"replication_addr"`
	// HTTPAddr is where the HTTP API listens; empty disables it.
	HTTPAddr string `toml:"http_addr"`
	// KafkaAddr is where the Kafka protocol listens; empty disables it.
	// Its default is Kafka's own port, so Kafka clients find a node
	// where they would find a broker.
	KafkaAddr string `toml:"kafka_addr"`
	// Rack names the failure domain this node stands in (a rack, an
	// availability zone); empty: none. Replicas of a partition are spread
	// over racks (cluster/placement) and a consumer of the same rack reads
	// from this node's replicas when they are in sync (follower reads).
	// The roster's entry for this node must name the same rack, because
	// the other nodes learn it there. At most RackBytesMax bytes.
	Rack string `toml:"rack"`
}

// Shard configures the per-core runtime.
type Shard struct {
	// Count is the number of shards; 0 means one per CPU.
	Count int `toml:"count"`
	// PinCores pins shard i to CPU i mod NumCPU.
	PinCores bool `toml:"pin_cores"`
	// InboxDepth bounds each shard's cross-shard inbox (messages).
	InboxDepth int `toml:"inbox_depth"`
}

// Network configures the client listener.
type Network struct {
	// MaxFrameBytes is the largest request frame accepted.
	MaxFrameBytes int `toml:"max_frame_bytes"`
	// MaxInflightPerConn bounds requests in flight on one connection.
	MaxInflightPerConn int `toml:"max_inflight_per_conn"`
	// MaxConnections bounds client connections per node.
	MaxConnections int `toml:"max_connections"`
	// OutboundBytesMax bounds bytes queued for sending on one connection.
	OutboundBytesMax int `toml:"outbound_bytes_max"`
	// TCPRetransmitMaxMs caps TCP's retransmission timeout on client and
	// replication connections (TCP_RTO_MAX_MS; kernels before Linux 6.11
	// ignore it); 0 keeps the kernel's 120 s.
	TCPRetransmitMaxMs int `toml:"tcp_retransmit_max_ms"`
}

// Storage configures every partition log on this node (a topic may
// override retention at creation).
type Storage struct {
	// Fsync is the fsync policy: always, interval, messages or never.
	Fsync string `toml:"fsync"`
	// FsyncIntervalMs is the period of the interval policy.
	FsyncIntervalMs int `toml:"fsync_interval_ms"`
	// FsyncMessages is the record count of the messages policy.
	FsyncMessages int `toml:"fsync_messages"`
	// SegmentBytes rolls the active segment at this size.
	SegmentBytes int64 `toml:"segment_bytes"`
	// SegmentMs rolls the active segment at this age.
	SegmentMs int64 `toml:"segment_ms"`
	// IndexIntervalBytes is the spacing of sparse index entries.
	IndexIntervalBytes int `toml:"index_interval_bytes"`
	// RetentionBytes deletes old segments past this size per partition (-1: no limit).
	RetentionBytes int64 `toml:"retention_bytes"`
	// RetentionMs deletes segments older than this (-1: no limit).
	RetentionMs int64 `toml:"retention_ms"`
	// MaxBatchBytes is the largest record batch a producer may send.
	MaxBatchBytes int `toml:"max_batch_bytes"`
	// WritebackBytes starts a background sync every that many bytes
	// written to a partition without one (0: off). Default
	// WritebackBytesDefault.
	WritebackBytes int64 `toml:"writeback_bytes"`
	// RetentionCheckIntervalMs is how often old segments are deleted.
	RetentionCheckIntervalMs int `toml:"retention_check_interval_ms"`

	// The log cleaner of compacted topics (docs/design/compaction.md).
	//
	// CleanerIntervalMs is how often each shard runs a bounded cleaner
	// step over its compacted partitions (default 1000).
	CleanerIntervalMs int `toml:"cleaner_interval_ms"`
	// CleanerBytesPerSec bounds what the cleaner reads and rewrites per
	// shard, spread over its steps (at least one batch a step; 0: the
	// cleaner is off). Default 32 MiB/s.
	CleanerBytesPerSec int64 `toml:"cleaner_bytes_per_sec"`
	// CleanerKeysMax bounds the key map of one cleaning pass (about 40
	// bytes a key; default 1,048,576).
	CleanerKeysMax int `toml:"cleaner_keys_max"`
}

// Defaults of the cleaner settings.
const (
	CleanerIntervalMsDefault  = 1000
	CleanerBytesPerSecDefault = 32 << 20
	CleanerKeysMaxDefault     = 1 << 20
)

// Bounds of cluster.groups_partitions.
const (
	// GroupsPartitionsDefault spreads groups over up to 16 coordinators.
	GroupsPartitionsDefault = 16
	// GroupsPartitionsMax bounds the internal topic: each partition is a
	// consensus group on every replica, whether or not a group lives in
	// it.
	GroupsPartitionsMax = 256
)

// Defaults and bounds of cluster.groups_checkpoint_records and
// cluster.groups_checkpoint_bytes.
const (
	// GroupsCheckpointRecordsDefault: a checkpoint per 10,000 commits
	// keeps a replay to one state plus at most twice that many records.
	GroupsCheckpointRecordsDefault = 10_000
	// GroupsCheckpointRecordsMax bounds how far apart checkpoints may be.
	GroupsCheckpointRecordsMax = 100_000_000
	// GroupsCheckpointBytesDefault is 8 MiB of keys and values.
	GroupsCheckpointBytesDefault = 8 << 20
	// GroupsCheckpointBytesMax is 1 GiB.
	GroupsCheckpointBytesMax = 1 << 30
)

// Cluster configures the roster and the consensus groups.
type Cluster struct {
	// Secret authenticates nodes to each other (challenge-response).
	Secret string `toml:"secret"`
	// DefaultReplicationFactor applies when a topic request omits it.
	DefaultReplicationFactor ReplicationFactor `toml:"default_replication_factor"`
	// HeartbeatIntervalMs is the primary's heartbeat period.
	HeartbeatIntervalMs int `toml:"heartbeat_interval_ms"`
	// ElectionTimeoutMs is the base election timeout (randomised up to 2x).
	ElectionTimeoutMs int `toml:"election_timeout_ms"`
	// AutoLeaderRebalance lets the metadata primary move primaries toward balance.
	AutoLeaderRebalance bool `toml:"auto_leader_rebalance"`
	// LeaderImbalancePercent is the tolerated deviation from the ideal count.
	LeaderImbalancePercent int `toml:"leader_imbalance_percent"`
	// LeaderBalanceIntervalMs is how often the balancer looks.
	LeaderBalanceIntervalMs int `toml:"leader_balance_interval_ms"`
	// LeaderImbalancePercentage is the share of a node's primaries, in
	// percent, that may lead away from their preferred replica (the first
	// of the replica list) before the balancer moves them back (Kafka's
	// leader.imbalance.per.broker.percentage; default 10).
	LeaderImbalancePercentage int `toml:"leader_imbalance_percentage"`
	// LeaderImbalanceCheckIntervalMs is how often the balancer checks the
	// preferred primaries (Kafka's leader.imbalance.check.interval.seconds;
	// default 30 s).
	LeaderImbalanceCheckIntervalMs int `toml:"leader_imbalance_check_interval_ms"`
	// ReassignConcurrency is how many replica moves the metadata primary
	// drives at once (the others of a plan wait their turn): each one
	// copies a partition's log to a new node, so it bounds the catch-up
	// traffic. Default 4, 1..64.
	ReassignConcurrency int `toml:"reassign_concurrency"`
	// ReassignThrottleBytesPerSecond bounds the catch-up bytes each node
	// sends, as a primary, to the new replicas of replica moves (all its
	// partitions together; never to in-sync followers). A plan's
	// --throttle overrides it while its moves run. Default 0: none.
	ReassignThrottleBytesPerSecond int64 `toml:"reassign_throttle_bytes_per_second"`
	// GroupsPartitions is N, the partitions of the internal topic that
	// holds consumer groups' state (docs/design/groups.md): a group lives
	// in partition hash(name) mod N and is coordinated by its primary, so
	// N bounds how many nodes share the coordinators. It is read when the
	// topic is created (on the first group request) and fixed then: a
	// later change would move groups away from their state. Default 16,
	// 1..256.
	GroupsPartitions int `toml:"groups_partitions"`
	// GroupsCheckpointRecords and GroupsCheckpointBytes: a groups
	// coordinator writes a checkpoint of its partition's state (every
	// live group and committed offset) once this many records, or this
	// many bytes of keys and values, went to its __groups partition
	// since the last one, so that every replica may delete the segments
	// below it (docs/design/groups.md "Checkpoints"). 0 turns a bound
	// off; both 0 turn checkpoints off and __groups grows forever.
	// Defaults 10,000 records (0..100,000,000) and 8 MiB (0..1 GiB).
	GroupsCheckpointRecords int64 `toml:"groups_checkpoint_records"`
	GroupsCheckpointBytes   int64 `toml:"groups_checkpoint_bytes"`
	// AutoCreateTopics lets a Kafka client create a topic by naming it in
	// a Metadata request that allows auto creation (Kafka's
	// auto.create.topics.enable), with DefaultPartitions partitions and
	// the default replication factor. Default false: a typo should not
	// make a topic.
	AutoCreateTopics bool `toml:"auto_create_topics"`
	// DefaultPartitions is the partition count of an auto-created topic
	// (Kafka's num.partitions). Default 1, 1..16384.
	DefaultPartitions int `toml:"default_partitions"`
	// ReplicaLagTimeMaxMs is how long a follower may go without catching
	// up to the primary's log end and still count as in sync (Kafka's
	// replica.lag.time.max.ms).
	ReplicaLagTimeMaxMs int `toml:"replica_lag_time_max_ms"`
	// Coordinator configures node-to-node connections.
	Coordinator Coordinator `toml:"coordinator"`
	// Nodes is the roster at the cluster's first start (the metadata
	// records it then, and the committed roster wins afterwards:
	// docs/design/membership.md); empty means a single node made of
	// [node]. A joining node lists itself and the nodes it first reaches.
	Nodes []RosterNode `toml:"nodes"`
	// Join says this node joins a running cluster that an operator adds
	// it to (corestream cluster add-node): it opens the metadata group as
	// a learner and never seeds the roster nor campaigns before it is a
	// voter. Harmless once the node has joined. Default false.
	Join bool `toml:"join"`
}

// Coordinator configures node-to-node connections.
type Coordinator struct {
	// ReplicaConnectionsPerPeer is K, the replication connections to each
	// peer; every node must use the same K.
	ReplicaConnectionsPerPeer int `toml:"replica_connections_per_peer"`
}

// RosterNode is one member of the roster with its advertised addresses.
type RosterNode struct {
	ID              int    `toml:"id"`
	ClientAddr      string `toml:"client_addr"`
	ReplicationAddr string `toml:"replication_addr"`
	HTTPAddr        string `toml:"http_addr"`
	// KafkaAddr is the Kafka listener's advertised address; empty when
	// the node serves no Kafka clients (they are then told of no broker
	// for it).
	KafkaAddr string `toml:"kafka_addr"`
	// Rack is the node's node.rack (empty: none).
	Rack string `toml:"rack"`
}

// HTTP configures the HTTP API.
type HTTP struct {
	// JWTSecret signs forwarding proofs; every node must share it.
	JWTSecret string `toml:"jwt_secret"`
	// GroupLagSeriesMax bounds the consumer-group lag series /metrics
	// serves: at most this many groups' totals and this many group and
	// partition series (the rest are counted in
	// corestream_group_lag_series_omitted); 0 serves none.
	GroupLagSeriesMax int `toml:"group_lag_series_max"`
	// HistoryIntervalMs is the time between two samples of the figures'
	// history the console charts (GET /v1/history); HistorySamplesMax
	// how many the node keeps, the oldest dropped first: the defaults
	// keep 15 minutes, one sample every 5 s.
	HistoryIntervalMs int64 `toml:"history_interval_ms"`
	HistorySamplesMax int   `toml:"history_samples_max"`
}

// Defaults of the HTTP settings.
const (
	// GroupLagSeriesMaxDefault is http.group_lag_series_max's default.
	GroupLagSeriesMaxDefault = 1000
	// HistoryIntervalMsDefault is http.history_interval_ms's default.
	HistoryIntervalMsDefault = 5000
	// HistorySamplesMaxDefault is http.history_samples_max's default.
	HistorySamplesMaxDefault = 180
)

// The values of security.auth.
const (
	// AuthNone lets every caller do everything (a local single node).
	AuthNone = "none"
	// AuthSCRAM requires every client to authenticate as a user of the
	// cluster (docs/security.md).
	AuthSCRAM = "scram"
)

// Security configures authentication (docs/security.md).
type Security struct {
	// Auth is none (default) or scram.
	Auth string `toml:"auth"`
	// AdminUser and AdminPassword create the first administrator when
	// the cluster has no user yet (the first start); later starts ignore
	// them. Required with auth = scram.
	AdminUser     string `toml:"admin_user"`
	AdminPassword string `toml:"admin_password"`
	// TokenTTLMs is the lifetime of a login token of the HTTP API.
	TokenTTLMs int64 `toml:"token_ttl_ms"`
	// LoginFailuresMax failed logins from one address within
	// LoginFailureWindowMs refuse that address's next logins until the
	// window has passed.
	LoginFailuresMax     int   `toml:"login_failures_max"`
	LoginFailureWindowMs int64 `toml:"login_failure_window_ms"`
	// TLSCertFile and TLSKeyFile, both or neither, make the HTTP API
	// serve HTTPS (reread on SIGHUP); TLSCAFile is the CA the node
	// trusts when it calls another node's HTTPS API ("": the system's).
	TLSCertFile string `toml:"tls_cert_file"`
	TLSKeyFile  string `toml:"tls_key_file"`
	TLSCAFile   string `toml:"tls_ca_file"`
	// TLSListeners names the listeners that serve TLS with that
	// certificate: any of client, kafka, replication, http (default
	// http alone, as before the others could). Replication TLS is both
	// ways: this node dials its peers over TLS too, trusting TLSCAFile.
	TLSListeners []string `toml:"tls_listeners"`
	// TLSClientAuth asks TLS clients of every TLS listener (client,
	// Kafka, replication, HTTP) for a certificate signed by TLSCAFile: none
	// (default), request (checked when given), require.
	TLSClientAuth string `toml:"tls_client_auth"`
	// TLSHandshakeTimeoutMs bounds a TLS handshake on those listeners.
	TLSHandshakeTimeoutMs int64 `toml:"tls_handshake_timeout_ms"`
}

// The listeners of security.tls_listeners.
const (
	ListenerClient      = "client"
	ListenerKafka       = "kafka"
	ListenerReplication = "replication"
	ListenerHTTP        = "http"
)

// The values of security.tls_client_auth.
const (
	ClientAuthNone    = "none"
	ClientAuthRequest = "request"
	ClientAuthRequire = "require"
)

// TLSOn reports whether listener (ListenerClient, …) serves TLS: it is
// named in tls_listeners and a certificate is configured.
func (s Security) TLSOn(listener string) bool {
	return s.TLSCertFile != "" && slices.Contains(s.TLSListeners, listener)
}

// Log configures the server's own log output.
type Log struct {
	// Level is debug, info, warn or error.
	Level string `toml:"level"`
}

// ReplicationFactor is a topic's number of copies: All or 1..32. Values
// outside the bounds are kept as decoded so that Validate can name the key.
type ReplicationFactor int

// All is the replication factor that means "every node of the roster".
const All ReplicationFactor = -1

// UnmarshalTOML accepts "all" or an integer.
func (f *ReplicationFactor) UnmarshalTOML(v any) error {
	switch x := v.(type) {
	case string:
		if x == "all" {
			*f = All
			return nil
		}
		n, err := strconv.Atoi(x)
		if err != nil {
			return fmt.Errorf("%q is neither \"all\" nor a number", x)
		}
		*f = ReplicationFactor(n)
	case int64:
		if x < 0 || x > 1<<20 {
			x = 0 // out of any sane range: Validate reports it
		}
		*f = ReplicationFactor(x)
	default:
		return fmt.Errorf("want \"all\" or 1..%d, got %v", ReplicationFactorMax, v)
	}
	return nil
}

// String renders "all" or the number.
func (f ReplicationFactor) String() string {
	if f == All {
		return "all"
	}
	return strconv.Itoa(int(f))
}

// Resolve returns the number of copies for a roster of n nodes.
func (f ReplicationFactor) Resolve(rosterNodes int) int {
	if f == All {
		return rosterNodes
	}
	return int(f)
}

// Default returns the embedded defaults: a single node that needs no file.
func Default() Config {
	return Config{
		Node: Node{ID: 1, DataDir: "./data", ClientAddr: "127.0.0.1:7070",
			ReplicationAddr: "127.0.0.1:7071", HTTPAddr: "127.0.0.1:7072", KafkaAddr: "127.0.0.1:9092"},
		Shard: Shard{Count: 0, InboxDepth: 4096},
		Network: Network{MaxFrameBytes: 16<<20 + 64<<10, MaxInflightPerConn: 256, MaxConnections: 10000, OutboundBytesMax: 8 << 20,
			TCPRetransmitMaxMs: 1000},
		Storage: Storage{Fsync: "always", FsyncIntervalMs: 1000, FsyncMessages: 10000,
			SegmentBytes: 1 << 30, SegmentMs: 7 * 24 * 3600 * 1000, IndexIntervalBytes: 4096,
			RetentionBytes: -1, RetentionMs: 7 * 24 * 3600 * 1000, MaxBatchBytes: 4 << 20,
			WritebackBytes: WritebackBytesDefault, RetentionCheckIntervalMs: 60_000,
			CleanerIntervalMs: CleanerIntervalMsDefault, CleanerBytesPerSec: CleanerBytesPerSecDefault, CleanerKeysMax: CleanerKeysMaxDefault},
		Cluster: Cluster{DefaultReplicationFactor: All, HeartbeatIntervalMs: 100, ElectionTimeoutMs: 1000,
			AutoLeaderRebalance: true, LeaderImbalancePercent: 10, LeaderBalanceIntervalMs: 30000,
			ReplicaLagTimeMaxMs: 30000, LeaderImbalancePercentage: 10, LeaderImbalanceCheckIntervalMs: 30000,
			ReassignConcurrency: 4, GroupsPartitions: GroupsPartitionsDefault, DefaultPartitions: 1,
			GroupsCheckpointRecords: GroupsCheckpointRecordsDefault, GroupsCheckpointBytes: GroupsCheckpointBytesDefault, Coordinator: Coordinator{ReplicaConnectionsPerPeer: 1}},
		Log:  Log{Level: "info"},
		HTTP: HTTP{GroupLagSeriesMax: GroupLagSeriesMaxDefault, HistoryIntervalMs: HistoryIntervalMsDefault, HistorySamplesMax: HistorySamplesMaxDefault},
		Security: Security{Auth: AuthNone, TokenTTLMs: 3600 * 1000, LoginFailuresMax: 10, LoginFailureWindowMs: 60 * 1000,
			TLSListeners: []string{ListenerHTTP}, TLSClientAuth: ClientAuthNone, TLSHandshakeTimeoutMs: 10_000},
	}
}

// Load reads path over the defaults. Unknown keys and invalid values are
// errors that name the key. An empty path returns the validated defaults.
func Load(path string) (Config, error) {
	c := Default()
	if path == "" {
		return c, c.Validate()
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return Parse(string(data))
}

// Parse decodes TOML text over the defaults and validates the result.
func Parse(text string) (Config, error) {
	c := Default()
	md, err := toml.Decode(text, &c)
	if err != nil {
		var perr toml.ParseError
		if errors.As(err, &perr) {
			return c, fmt.Errorf("%w: %s", ErrInvalid, perr.ErrorWithPosition())
		}
		return c, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return c, fmt.Errorf("%w: unknown key %s", ErrInvalid, strings.Join(keys, ", "))
	}
	return c, c.Validate()
}

// Shards returns the effective shard count.
func (c *Config) Shards() int {
	if c.Shard.Count == 0 {
		return runtime.NumCPU()
	}
	return c.Shard.Count
}

// Roster returns the cluster's members; a node without [[cluster.nodes]]
// forms a roster of itself.
func (c *Config) Roster() []RosterNode {
	if len(c.Cluster.Nodes) > 0 {
		return c.Cluster.Nodes
	}
	return []RosterNode{{ID: c.Node.ID, ClientAddr: c.Node.ClientAddr,
		ReplicationAddr: c.Node.ReplicationAddr, HTTPAddr: c.Node.HTTPAddr, KafkaAddr: c.Node.KafkaAddr, Rack: c.Node.Rack}}
}

func bad(key, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrInvalid, key, fmt.Sprintf(format, args...))
}

func inRange(key string, v, lo, hi int64) error {
	if v < lo || v > hi {
		return bad(key, "%d is outside %d..%d", v, lo, hi)
	}
	return nil
}

// retransmitMax checks a TCP retransmission cap: 0 (the kernel's), or
// within what the kernel accepts, 1 s..120 s.
func retransmitMax(key string, ms int) error {
	if ms == 0 {
		return nil
	}
	return inRange(key, int64(ms), 1000, 120000)
}

// RackBytesMax bounds a rack name (the protocol's bound).
const RackBytesMax = 255

// rack checks a rack name: empty (none), or 1..RackBytesMax bytes of
// printable ASCII without spaces, so that it shows in a table and a flag.
func rack(key, v string) error {
	if len(v) > RackBytesMax {
		return bad(key, "%d bytes, at most %d", len(v), RackBytesMax)
	}
	for i := 0; i < len(v); i++ {
		if v[i] <= ' ' || v[i] > '~' {
			return bad(key, "%q has a character outside printable ASCII or a space at byte %d", v, i)
		}
	}
	return nil
}

func addr(key, v string, optional bool) error {
	if v == "" && optional {
		return nil
	}
	if _, _, err := net.SplitHostPort(v); err != nil {
		return bad(key, "%q is not HOST:PORT", v)
	}
	return nil
}

// Validate checks every value against its bounds and the roster rules.
func (c *Config) Validate() error {
	checks := []error{
		inRange("node.id", int64(c.Node.ID), 1, RosterNodesMax),
		addr("node.client_addr", c.Node.ClientAddr, false),
		addr("node.replication_addr", c.Node.ReplicationAddr, true),
		addr("node.http_addr", c.Node.HTTPAddr, true),
		addr("node.kafka_addr", c.Node.KafkaAddr, true),
		inRange("shard.count", int64(c.Shard.Count), 0, ShardsMax),
		inRange("shard.inbox_depth", int64(c.Shard.InboxDepth), 16, 1<<20),
		inRange("http.group_lag_series_max", int64(c.HTTP.GroupLagSeriesMax), 0, 100000),
		inRange("http.history_interval_ms", c.HTTP.HistoryIntervalMs, 100, 3600000),
		inRange("http.history_samples_max", int64(c.HTTP.HistorySamplesMax), 1, 4096),
		inRange("network.max_frame_bytes", int64(c.Network.MaxFrameBytes), FrameBytesMin, FrameBytesMax),
		inRange("network.max_inflight_per_conn", int64(c.Network.MaxInflightPerConn), 1, 65536),
		inRange("network.max_connections", int64(c.Network.MaxConnections), 1, 1<<20),
		inRange("network.outbound_bytes_max", int64(c.Network.OutboundBytesMax), 64<<10, 1<<30),
		retransmitMax("network.tcp_retransmit_max_ms", c.Network.TCPRetransmitMaxMs),
		inRange("storage.fsync_interval_ms", int64(c.Storage.FsyncIntervalMs), 1, 3600*1000),
		inRange("storage.fsync_messages", int64(c.Storage.FsyncMessages), 1, 1<<31-1),
		inRange("storage.segment_bytes", c.Storage.SegmentBytes, 1<<20, 1<<31-1), // positions are 32-bit
		inRange("storage.segment_ms", c.Storage.SegmentMs, 1000, 1<<50),
		inRange("storage.index_interval_bytes", int64(c.Storage.IndexIntervalBytes), 64, 1<<24),
		inRange("storage.retention_bytes", c.Storage.RetentionBytes, -1, 1<<60),
		inRange("storage.retention_ms", c.Storage.RetentionMs, -1, 1<<50),
		inRange("storage.max_batch_bytes", int64(c.Storage.MaxBatchBytes), 1<<10, BatchBytesMax),
		inRange("storage.writeback_bytes", c.Storage.WritebackBytes, 0, 1<<30),
		inRange("storage.retention_check_interval_ms", int64(c.Storage.RetentionCheckIntervalMs), 100, 24*3600*1000),
		inRange("storage.cleaner_interval_ms", int64(c.Storage.CleanerIntervalMs), 10, 3600*1000),
		inRange("storage.cleaner_bytes_per_sec", c.Storage.CleanerBytesPerSec, 0, 1<<40),
		inRange("storage.cleaner_keys_max", int64(c.Storage.CleanerKeysMax), 1024, 1<<28),
		inRange("cluster.heartbeat_interval_ms", int64(c.Cluster.HeartbeatIntervalMs), 10, 10000),
		inRange("cluster.election_timeout_ms", int64(c.Cluster.ElectionTimeoutMs), 100, 60000),
		inRange("cluster.leader_imbalance_percent", int64(c.Cluster.LeaderImbalancePercent), 0, 100),
		inRange("cluster.leader_balance_interval_ms", int64(c.Cluster.LeaderBalanceIntervalMs), 100, 24*3600*1000),
		inRange("cluster.replica_lag_time_max_ms", int64(c.Cluster.ReplicaLagTimeMaxMs), 100, 3600*1000),
		inRange("cluster.leader_imbalance_percentage", int64(c.Cluster.LeaderImbalancePercentage), 0, 100),
		inRange("cluster.reassign_concurrency", int64(c.Cluster.ReassignConcurrency), 1, 64),
		inRange("cluster.reassign_throttle_bytes_per_second", c.Cluster.ReassignThrottleBytesPerSecond, 0, 1<<40),
		inRange("cluster.groups_partitions", int64(c.Cluster.GroupsPartitions), 1, GroupsPartitionsMax),
		inRange("cluster.default_partitions", int64(c.Cluster.DefaultPartitions), 1, 16384),
		inRange("cluster.groups_checkpoint_records", c.Cluster.GroupsCheckpointRecords, 0, GroupsCheckpointRecordsMax),
		inRange("cluster.groups_checkpoint_bytes", c.Cluster.GroupsCheckpointBytes, 0, GroupsCheckpointBytesMax),
		inRange("cluster.leader_imbalance_check_interval_ms", int64(c.Cluster.LeaderImbalanceCheckIntervalMs), 100, 24*3600*1000),
		rack("node.rack", c.Node.Rack),
		inRange("cluster.coordinator.replica_connections_per_peer", int64(c.Cluster.Coordinator.ReplicaConnectionsPerPeer), 1, ReplicaConnectionsPerPeerMax),
	}
	for _, err := range checks {
		if err != nil {
			return err
		}
	}
	switch c.Storage.Fsync {
	case "always", "interval", "messages", "never":
	default:
		return bad("storage.fsync", "%q is not one of always, interval, messages, never", c.Storage.Fsync)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		return bad("log.level", "%q is not one of debug, info, warn, error", c.Log.Level)
	}
	if int64(c.Storage.MaxBatchBytes)+1024 > int64(c.Network.MaxFrameBytes) {
		return bad("storage.max_batch_bytes", "%d does not fit in network.max_frame_bytes %d with 1 KiB for headers",
			c.Storage.MaxBatchBytes, c.Network.MaxFrameBytes)
	}
	if err := c.validateSecurity(); err != nil {
		return err
	}
	if c.Cluster.ElectionTimeoutMs < 3*c.Cluster.HeartbeatIntervalMs {
		return bad("cluster.election_timeout_ms", "%d must be at least 3 × cluster.heartbeat_interval_ms (%d)",
			c.Cluster.ElectionTimeoutMs, c.Cluster.HeartbeatIntervalMs)
	}
	return c.validateRoster()
}

func (c *Config) validateRoster() error {
	nodes := c.Cluster.Nodes
	if len(nodes) > RosterNodesMax {
		return bad("cluster.nodes", "%d nodes, at most %d", len(nodes), RosterNodesMax)
	}
	f := int(c.Cluster.DefaultReplicationFactor)
	if c.Cluster.DefaultReplicationFactor != All {
		if f < 1 || f > ReplicationFactorMax {
			return bad("cluster.default_replication_factor", "%d is outside 1..%d", f, ReplicationFactorMax)
		}
		if n := len(c.Roster()); f > n {
			return bad("cluster.default_replication_factor", "%d exceeds the roster of %d nodes", f, n)
		}
	}
	if len(nodes) == 0 {
		if c.Cluster.Join {
			return bad("cluster.join", "a joining node must list itself and at least one node of the running cluster in cluster.nodes")
		}
		return nil
	}
	ids := map[int]bool{}
	addrs := map[string]string{}
	self := false
	for i, n := range nodes {
		key := fmt.Sprintf("cluster.nodes[%d]", i)
		if err := inRange(key+".id", int64(n.ID), 1, RosterNodesMax); err != nil {
			return err
		}
		if ids[n.ID] {
			return bad(key+".id", "duplicate node id %d", n.ID)
		}
		ids[n.ID] = true
		self = self || n.ID == c.Node.ID
		if err := rack(key+".rack", n.Rack); err != nil {
			return err
		}
		if n.ID == c.Node.ID && n.Rack != c.Node.Rack {
			// The other nodes know this one's rack only from the roster:
			// a node.rack they do not share would place replicas and
			// pick read replicas by a rack only this node believes.
			return bad(key+".rack", "%q differs from node.rack %q; set both to this node's rack", n.Rack, c.Node.Rack)
		}
		for _, a := range []struct{ k, v string }{{"client_addr", n.ClientAddr}, {"replication_addr", n.ReplicationAddr}, {"http_addr", n.HTTPAddr},
			{"kafka_addr", n.KafkaAddr}} {
			if err := addr(key+"."+a.k, a.v, a.k == "http_addr" || a.k == "kafka_addr"); err != nil {
				return err
			}
			if a.v == "" {
				continue
			}
			if prev, dup := addrs[a.v]; dup {
				return bad(key+"."+a.k, "address %s is already used by %s", a.v, prev)
			}
			addrs[a.v] = key + "." + a.k
		}
	}
	if !self {
		return bad("node.id", "%d is not in cluster.nodes", c.Node.ID)
	}
	if len(nodes) > 1 && c.Cluster.Secret == "" {
		return bad("cluster.secret", "must be set for a roster of %d nodes", len(nodes))
	}
	if c.Cluster.Join && len(nodes) < 2 {
		return bad("cluster.join", "a joining node must list itself and at least one node of the running cluster in cluster.nodes")
	}
	return nil
}

func (c *Config) validateTLS() error {
	s := c.Security
	seen := map[string]bool{}
	for _, l := range s.TLSListeners {
		switch l {
		case ListenerClient, ListenerKafka, ListenerReplication, ListenerHTTP:
		default:
			return bad("security.tls_listeners", "%q is not one of client, kafka, replication, http", l)
		}
		if seen[l] {
			return bad("security.tls_listeners", "%q is named twice", l)
		}
		seen[l] = true
		if l != ListenerHTTP && s.TLSCertFile == "" {
			return bad("security.tls_listeners", "%q needs security.tls_cert_file and tls_key_file (the certificate it serves)", l)
		}
	}
	switch s.TLSClientAuth {
	case ClientAuthNone:
	case ClientAuthRequest, ClientAuthRequire:
		if s.TLSCAFile == "" {
			return bad("security.tls_client_auth", "%q needs security.tls_ca_file, the CA that signs the clients' certificates", s.TLSClientAuth)
		}
	default:
		return bad("security.tls_client_auth", "%q is not one of none, request, require", s.TLSClientAuth)
	}
	return nil
}

func (c *Config) validateSecurity() error {
	s := c.Security
	checks := []error{
		inRange("security.token_ttl_ms", s.TokenTTLMs, 1000, 30*24*3600*1000),
		inRange("security.login_failures_max", int64(s.LoginFailuresMax), 1, 1<<20),
		inRange("security.login_failure_window_ms", s.LoginFailureWindowMs, 1000, 24*3600*1000),
		inRange("security.tls_handshake_timeout_ms", s.TLSHandshakeTimeoutMs, 100, 60_000),
		c.validateTLS(),
	}
	for _, err := range checks {
		if err != nil {
			return err
		}
	}
	if (s.TLSCertFile == "") != (s.TLSKeyFile == "") {
		return bad("security.tls_cert_file", "security.tls_cert_file and security.tls_key_file go together: set both, or neither")
	}
	switch s.Auth {
	case AuthNone:
		return nil
	case AuthSCRAM:
	default:
		return bad("security.auth", "%q is not one of none, scram", s.Auth)
	}
	if s.AdminUser == "" || s.AdminPassword == "" {
		return bad("security.admin_user", "auth = scram needs security.admin_user and security.admin_password: the administrator created at the first start (no one could log in otherwise)")
	}
	if c.Node.HTTPAddr != "" && c.HTTP.JWTSecret == "" {
		return bad("http.jwt_secret", "auth = scram with an HTTP API needs http.jwt_secret to sign login tokens")
	}
	return nil
}
