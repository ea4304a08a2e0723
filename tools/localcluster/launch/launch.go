// Package launch plans and runs a local corestream cluster on loopback:
// it picks free ports, gives every node its own data directory with its
// TOML configuration in it, starts `corestream serve --config` for each
// node, waits until the cluster has formed, and stops the nodes.
//
// tools/localcluster is its command line; the multi-process end-to-end
// tests of cmd/corestream plan their clusters with it, so the operator's
// launcher and the tests run the same configurations.
package launch

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/corestream/corestream/cluster/config"
)

// Files inside each node's data directory.
const (
	// ConfigFile is the node's configuration, written by Plan.Write.
	ConfigFile = "corestream.toml"
	// LogFile collects the node's stdout and stderr when Start runs it.
	LogFile = "corestream.log"
)

// Errors.
var (
	// ErrOptions is wrapped by every refusal of Options; the message
	// names the option.
	ErrOptions = errors.New("launch: bad option")
)

// Options describe a local cluster. The zero value of a field means its
// documented default.
type Options struct {
	// Nodes is the roster size, 1..config.RosterNodesMax. Default 3.
	Nodes int
	// Dir is the cluster's directory: node i's data directory is
	// Dir/node-i. Required.
	Dir string
	// Host is the loopback address every listener binds. Default 127.0.0.1.
	Host string
	// ReplicationFactor is cluster.default_replication_factor: "all" or a
	// number. Default "all".
	ReplicationFactor string
	// K is cluster.coordinator.replica_connections_per_peer. Default 1.
	K int
	// Shards is shard.count on every node (0: one per CPU).
	Shards int
	// Fsync is storage.fsync. Default "always".
	Fsync string
	// HeartbeatIntervalMs and ElectionTimeoutMs are the consensus timing
	// (cluster.heartbeat_interval_ms, cluster.election_timeout_ms).
	// Defaults 100 and 1000, the broker's own.
	HeartbeatIntervalMs, ElectionTimeoutMs int
	// Secret is cluster.secret. Default: 16 random bytes in hex.
	Secret string
	// JWTSecret is http.jwt_secret, with which nodes sign the HTTP
	// forwarding proofs. Default: 16 random bytes in hex.
	JWTSecret string
	// LogLevel is log.level. Default "info".
	LogLevel string
	// Racks are the racks nodes are dealt into in turn: node i (from 1)
	// gets node.rack Racks[(i-1) mod len(Racks)]. Empty: no racks.
	Racks []string
	// TLS serves TLS on every listener (client, Kafka, replication,
	// HTTP): Write generates a test CA (Dir/tls/ca.pem, Plan.CAFile) and
	// a certificate for each node, signed by it, for Host and localhost.
	TLS bool
	// HistoryIntervalMs is http.history_interval_ms, the time between two
	// samples of the figures the console charts (0: the broker's default,
	// 5000).
	HistoryIntervalMs int
}

func (o Options) withDefaults() (Options, error) {
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	if o.ReplicationFactor == "" {
		o.ReplicationFactor = "all"
	}
	if o.K == 0 {
		o.K = 1
	}
	if o.Fsync == "" {
		o.Fsync = "always"
	}
	if o.HeartbeatIntervalMs == 0 {
		o.HeartbeatIntervalMs = 100
	}
	if o.ElectionTimeoutMs == 0 {
		o.ElectionTimeoutMs = 1000
	}
	if o.LogLevel == "" {
		o.LogLevel = "info"
	}
	for _, p := range []*string{&o.Secret, &o.JWTSecret} {
		if *p == "" {
			var b [16]byte
			if _, err := rand.Read(b[:]); err != nil {
				return o, err
			}
			*p = hex.EncodeToString(b[:])
		}
	}
	switch {
	case o.Nodes < 1 || o.Nodes > config.RosterNodesMax:
		return o, fmt.Errorf("%w: nodes %d is outside 1..%d", ErrOptions, o.Nodes, config.RosterNodesMax)
	case o.Dir == "":
		return o, fmt.Errorf("%w: dir is empty", ErrOptions)
	case len(o.Racks) > o.Nodes:
		return o, fmt.Errorf("%w: %d racks for %d nodes leave a rack empty", ErrOptions, len(o.Racks), o.Nodes)
	case o.ReplicationFactor != "all":
		if _, err := strconv.Atoi(o.ReplicationFactor); err != nil {
			return o, fmt.Errorf("%w: replication factor %q is neither \"all\" nor a number", ErrOptions, o.ReplicationFactor)
		}
	}
	return o, nil
}

// Node is one member of a planned cluster. New fills every field from
// the Options; a test may change Secret or K of one node before Write to
// make it disagree with the others.
type Node struct {
	ID              int    `json:"id"`
	ClientAddr      string `json:"client_addr"`
	ReplicationAddr string `json:"replication_addr"`
	HTTPAddr        string `json:"http_addr"`
	KafkaAddr       string `json:"kafka_addr"`
	Rack            string `json:"rack,omitempty"`
	DataDir         string `json:"data_dir"`
	// Config is the node's configuration file (DataDir/ConfigFile).
	Config string `json:"config"`
	// Log is where Start sends the node's output (DataDir/LogFile).
	Log string `json:"log"`
	// Secret and K are this node's cluster.secret and
	// cluster.coordinator.replica_connections_per_peer.
	Secret string `json:"-"`
	K      int    `json:"-"`
}

// Plan is a cluster's roster and configuration.
type Plan struct {
	Options Options
	Nodes   []Node
	// CAFile is the test CA that signed the nodes' certificates, with
	// Options.TLS ("" without): clients trust it (corestream --tls-ca).
	CAFile string
	// clientTLS trusts CAFile, for the readiness probes (nil without TLS).
	clientTLS *tls.Config
}

// New plans a cluster: free ports on Options.Host for every listener and
// one data directory per node under Options.Dir (created by Write).
//
// The ports are free when New returns; another process may take one
// before the node binds it (the node then fails to start, saying which
// address).
func New(o Options) (*Plan, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	o.Dir = dir
	const perNode = 4 // client, replication, HTTP, Kafka
	addrs, err := FreeAddrs(o.Host, perNode*o.Nodes)
	if err != nil {
		return nil, err
	}
	p := &Plan{Options: o}
	if o.TLS {
		p.CAFile = filepath.Join(dir, "tls", "ca.pem")
	}
	for i := 0; i < o.Nodes; i++ {
		id := i + 1
		data := filepath.Join(dir, "node-"+strconv.Itoa(id))
		rack := ""
		if len(o.Racks) > 0 {
			rack = o.Racks[i%len(o.Racks)]
		}
		p.Nodes = append(p.Nodes, Node{ID: id, ClientAddr: addrs[perNode*i], ReplicationAddr: addrs[perNode*i+1],
			HTTPAddr: addrs[perNode*i+2], KafkaAddr: addrs[perNode*i+3], Rack: rack,
			DataDir: data, Config: filepath.Join(data, ConfigFile), Log: filepath.Join(data, LogFile),
			Secret: o.Secret, K: o.K})
	}
	return p, nil
}

// FreeAddrs returns n distinct HOST:PORT addresses on host whose ports
// were free a moment ago (all are held open together, then closed).
//
// The ports are drawn below the kernel's ephemeral range (from
// fixedPortMin up to its start) where it leaves room: a node restarted on
// its own port must not find it taken meanwhile by the source port of
// some outgoing connection, and the kernel draws those, like the ports it
// hands out for ":0", from the ephemeral range. (The fault harness met
// exactly that: a killed node's HTTP port taken while it was down.)
func FreeAddrs(host string, n int) ([]string, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	out := make([]string, 0, n)
	hi := ephemeralPortStart()
	for tries := 0; len(out) < n && hi-fixedPortMin >= 4*n && tries < 64*n; tries++ {
		port := fixedPortMin + mrand.IntN(hi-fixedPortMin)
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			continue // taken, or held by an earlier pick of this call
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	for len(out) < n {
		l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("launch: finding a free port on %s: %w", host, err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().String())
	}
	return out, nil
}

// fixedPortMin is the lowest port FreeAddrs picks: above the well-known
// and most registered services' ports.
const fixedPortMin = 10000

// ephemeralPortStart is the first port of the kernel's ephemeral range
// (Linux's default 32768 when the range cannot be read).
func ephemeralPortStart() int {
	const linuxDefault = 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return linuxDefault
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return linuxDefault
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo <= 0 {
		return linuxDefault
	}
	return lo
}

// Brokers lists the client addresses, comma-separated (for --brokers).
func (p *Plan) Brokers() string {
	addrs := make([]string, len(p.Nodes))
	for i, n := range p.Nodes {
		addrs[i] = n.ClientAddr
	}
	return strings.Join(addrs, ",")
}

// TOML renders node i's configuration (index into Nodes, not the id).
func (p *Plan) TOML(i int) string {
	o, n := p.Options, p.Nodes[i]
	rf := o.ReplicationFactor
	if rf == "all" {
		rf = strconv.Quote(rf)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Node %d of a local cluster of %d nodes (written by tools/localcluster).\n", n.ID, len(p.Nodes))
	fmt.Fprintf(&b, "# Run it alone with: corestream serve --config %s\n\n", n.Config)
	fmt.Fprintf(&b, "[node]\nid = %d\ndata_dir = %q\nclient_addr = %q\nreplication_addr = %q\nhttp_addr = %q\nkafka_addr = %q\nrack = %q\n\n",
		n.ID, n.DataDir, n.ClientAddr, n.ReplicationAddr, n.HTTPAddr, n.KafkaAddr, n.Rack)
	fmt.Fprintf(&b, "[shard]\ncount = %d\n\n", o.Shards)
	fmt.Fprintf(&b, "[storage]\nfsync = %q\n\n", o.Fsync)
	fmt.Fprintf(&b, "[log]\nlevel = %q\n\n", o.LogLevel)
	fmt.Fprintf(&b, "[http]\njwt_secret = %q\n", o.JWTSecret)
	if o.HistoryIntervalMs > 0 {
		fmt.Fprintf(&b, "history_interval_ms = %d\n", o.HistoryIntervalMs)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "[cluster]\nsecret = %q\ndefault_replication_factor = %s\nheartbeat_interval_ms = %d\nelection_timeout_ms = %d\n\n",
		n.Secret, rf, o.HeartbeatIntervalMs, o.ElectionTimeoutMs)
	if o.TLS {
		fmt.Fprintf(&b, "[security]\ntls_cert_file = %q\ntls_key_file = %q\ntls_ca_file = %q\ntls_listeners = [\"client\", \"kafka\", \"replication\", \"http\"]\n\n",
			nodeCertFile(n), nodeKeyFile(n), p.CAFile)
	}
	fmt.Fprintf(&b, "[cluster.coordinator]\nreplica_connections_per_peer = %d\n", n.K)
	for _, m := range p.Nodes {
		fmt.Fprintf(&b, "\n[[cluster.nodes]]\nid = %d\nclient_addr = %q\nreplication_addr = %q\nhttp_addr = %q\nkafka_addr = %q\nrack = %q\n",
			m.ID, m.ClientAddr, m.ReplicationAddr, m.HTTPAddr, m.KafkaAddr, m.Rack)
	}
	return b.String()
}

// Write creates every node's data directory and writes its configuration
// file, after checking that the broker would accept it (config.Parse): a
// bad option is reported here with the key it sets, before any process
// starts.
func (p *Plan) Write() error {
	if p.Options.TLS {
		if err := p.writeTLS(); err != nil {
			return err
		}
	}
	for i, n := range p.Nodes {
		text := p.TOML(i)
		if _, err := config.Parse(text); err != nil {
			return fmt.Errorf("launch: node %d: %w", n.ID, err)
		}
		if err := os.MkdirAll(n.DataDir, 0o755); err != nil {
			return fmt.Errorf("launch: node %d: %w", n.ID, err)
		}
		if err := os.WriteFile(n.Config, []byte(text), 0o644); err != nil {
			return fmt.Errorf("launch: node %d: %w", n.ID, err)
		}
	}
	return nil
}
