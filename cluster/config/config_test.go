package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestDefaultsValidate(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if got := c.Roster(); len(got) != 1 || got[0].ID != 1 || got[0].ClientAddr != "127.0.0.1:7070" {
		t.Fatalf("single-node roster = %+v", got)
	}
	if c.Cluster.DefaultReplicationFactor.Resolve(5) != 5 {
		t.Fatal("default factor must be all")
	}
}

func TestRacksReachTheRoster(t *testing.T) {
	c, err := Parse("[node]\nrack = \"eu-1a\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Roster()[0].Rack; got != "eu-1a" {
		t.Fatalf("single-node roster rack = %q, want eu-1a", got)
	}
	d := Default()
	if d.Cluster.LeaderImbalancePercentage != 10 || d.Cluster.LeaderImbalanceCheckIntervalMs != 30000 {
		t.Fatalf("imbalance defaults = %d%%, %d ms; want 10%%, 30000 ms", d.Cluster.LeaderImbalancePercentage, d.Cluster.LeaderImbalanceCheckIntervalMs)
	}
}

func TestParseErrorsNameTheKey(t *testing.T) {
	roster3 := `
[node]
id = 1
[cluster]
secret = "s"
[[cluster.nodes]]
id = 1
client_addr = "127.0.0.1:1"
replication_addr = "127.0.0.1:2"
[[cluster.nodes]]
id = 2
client_addr = "127.0.0.1:3"
replication_addr = "127.0.0.1:4"
[[cluster.nodes]]
id = 3
client_addr = "127.0.0.1:5"
replication_addr = "127.0.0.1:6"
`
	cases := []struct {
		name, text, want string
	}{
		{"unknown key", "[storage]\nfsyncc = \"always\"\n", "unknown key storage.fsyncc"},
		{"unknown section", "[stroage]\nfsync = \"always\"\n", "unknown key stroage"},
		{"bad fsync", "[storage]\nfsync = \"sometimes\"\n", "storage.fsync: \"sometimes\" is not one of"},
		{"shards over max", "[shard]\ncount = 1000\n", "shard.count: 1000 is outside 0..256"},
		{"bad addr", "[node]\nclient_addr = \"nowhere\"\n", "node.client_addr: \"nowhere\" is not HOST:PORT"},
		{"bad kafka addr", "[node]\nkafka_addr = \"9092\"\n", "node.kafka_addr: \"9092\" is not HOST:PORT"},
		{"factor 0", "[cluster]\ndefault_replication_factor = 0\n", "cluster.default_replication_factor"},
		{"factor 33", "[cluster]\ndefault_replication_factor = 33\n", "33 is outside 1..32"},
		{"factor word", "[cluster]\ndefault_replication_factor = \"most\"\n", "neither \"all\" nor a number"},
		{"factor over roster", "[cluster]\ndefault_replication_factor = 2\n", "exceeds the roster of 1 nodes"},
		{"wrong type", "[shard]\ncount = \"two\"\n", "shard.count"},
		{"syntax", "[shard\n", "At line"},
		{"duplicate id", strings.Replace(roster3, "id = 3", "id = 2", 1), "cluster.nodes[2].id: duplicate node id 2"},
		{"duplicate addr", strings.Replace(roster3, "127.0.0.1:6", "127.0.0.1:4", 1), "cluster.nodes[2].replication_addr: address 127.0.0.1:4 is already used by cluster.nodes[1].replication_addr"},
		{"self missing", strings.Replace(roster3, "[node]\nid = 1", "[node]\nid = 9", 1), "node.id: 9 is not in cluster.nodes"},
		{"no secret", strings.Replace(roster3, "secret = \"s\"", "", 1), "cluster.secret: must be set"},
		{"frame vs batch", "[storage]\nmax_batch_bytes = 16777216\n[network]\nmax_frame_bytes = 1048576\n", "storage.max_batch_bytes"},
		{"retransmit cap under the kernel's least", "[network]\ntcp_retransmit_max_ms = 500\n", "network.tcp_retransmit_max_ms: 500 is outside 1000..120000"},
		{"lag window too short", "[cluster]\nreplica_lag_time_max_ms = 10\n", "cluster.replica_lag_time_max_ms: 10 is outside 100..3600000"},
		{"imbalance percentage over 100", "[cluster]\nleader_imbalance_percentage = 101\n", "cluster.leader_imbalance_percentage: 101 is outside 0..100"},
		{"imbalance check too often", "[cluster]\nleader_imbalance_check_interval_ms = 5\n", "cluster.leader_imbalance_check_interval_ms: 5 is outside 100..86400000"},
		{"groups partitions zero", "[cluster]\ngroups_partitions = 0\n", "cluster.groups_partitions: 0 is outside 1..256"},
		{"groups partitions over max", "[cluster]\ngroups_partitions = 257\n", "cluster.groups_partitions: 257 is outside 1..256"},
		{"groups checkpoint records negative", "[cluster]\ngroups_checkpoint_records = -1\n", "cluster.groups_checkpoint_records: -1 is outside 0..100000000"},
		{"groups checkpoint bytes over max", "[cluster]\ngroups_checkpoint_bytes = 1073741825\n", "cluster.groups_checkpoint_bytes: 1073741825 is outside 0..1073741824"},
		{"rack with a space", "[node]\nrack = \"rack a\"\n", "node.rack: \"rack a\" has a character"},
		{"rack too long", "[node]\nrack = \"" + strings.Repeat("r", 256) + "\"\n", "node.rack: 256 bytes, at most 255"},
		{"roster rack differs from node.rack", strings.Replace(strings.Replace(roster3, "[node]\nid = 1", "[node]\nid = 1\nrack = \"a\"", 1),
			"replication_addr = \"127.0.0.1:2\"", "replication_addr = \"127.0.0.1:2\"\nrack = \"b\"", 1), "cluster.nodes[0].rack: \"b\" differs from node.rack \"a\""},
		{"roster without this node's rack", strings.Replace(roster3, "[node]\nid = 1", "[node]\nid = 1\nrack = \"a\"", 1), "cluster.nodes[0].rack: \"\" differs from node.rack \"a\""},
		{"election vs heartbeat", "[cluster]\nheartbeat_interval_ms = 500\nelection_timeout_ms = 1000\n", "cluster.election_timeout_ms"},
		{"unknown auth", "[security]\nauth = \"ldap\"\n", "security.auth: \"ldap\" is not one of none, scram"},
		{"scram without an admin", "[security]\nauth = \"scram\"\n", "security.admin_user: auth = scram needs"},
		{"scram without a token secret", "[security]\nauth = \"scram\"\nadmin_user = \"a\"\nadmin_password = \"p\"\n", "http.jwt_secret: auth = scram with an HTTP API"},
		{"token ttl", "[security]\ntoken_ttl_ms = 5\n", "security.token_ttl_ms: 5 is outside"},
		{"join without a roster", "[cluster]\njoin = true\n", "cluster.join: a joining node must list itself and at least one node"},
		{"tls cert without key", "[security]\ntls_cert_file = \"c.pem\"\n", "security.tls_cert_file and security.tls_key_file go together"},
		{"tls listener unknown", "[security]\ntls_listeners = [\"admin\"]\n", "security.tls_listeners: \"admin\" is not one of"},
		{"tls listener twice", "[security]\ntls_cert_file = \"c\"\ntls_key_file = \"k\"\ntls_listeners = [\"kafka\", \"kafka\"]\n", "\"kafka\" is named twice"},
		{"tls listener without a certificate", "[security]\ntls_listeners = [\"client\"]\n", "security.tls_listeners: \"client\" needs security.tls_cert_file"},
		{"tls client auth unknown", "[security]\ntls_client_auth = \"maybe\"\n", "security.tls_client_auth: \"maybe\" is not one of none, request, require"},
		{"tls client auth without a CA", "[security]\ntls_cert_file = \"c\"\ntls_key_file = \"k\"\ntls_client_auth = \"require\"\n", "\"require\" needs security.tls_ca_file"},
		{"tls handshake timeout", "[security]\ntls_handshake_timeout_ms = 5\n", "security.tls_handshake_timeout_ms: 5 is outside 100..60000"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.text)
			if err == nil {
				t.Fatalf("accepted:\n%s", tc.text)
			}
			if !errors.Is(err, ErrInvalid) && !strings.Contains(err.Error(), "config") {
				t.Errorf("error does not wrap ErrInvalid: %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
	if _, err := Parse(roster3); err != nil {
		t.Fatalf("valid roster refused: %v", err)
	}
	if c, err := Parse(strings.Replace(roster3, "secret = \"s\"", "secret = \"s\"\njoin = true", 1)); err != nil || !c.Cluster.Join {
		t.Fatalf("a joining node's roster refused: %v", err)
	}
}

func TestRosterOver32(t *testing.T) {
	var b strings.Builder
	b.WriteString("[node]\nid = 1\n[cluster]\nsecret = \"s\"\n")
	for i := 1; i <= 33; i++ {
		// id 33 is out of range too, but the roster size is checked first.
		b.WriteString("[[cluster.nodes]]\n")
		b.WriteString("id = " + itoa(i) + "\n")
		b.WriteString("client_addr = \"127.0.0.1:" + itoa(10000+i) + "\"\n")
		b.WriteString("replication_addr = \"127.0.0.1:" + itoa(20000+i) + "\"\n")
	}
	_, err := Parse(b.String())
	if err == nil || !strings.Contains(err.Error(), "cluster.nodes: 33 nodes, at most 32") {
		t.Fatalf("err = %v", err)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestOverridesKeepOtherDefaults(t *testing.T) {
	c, err := Parse("[storage]\nfsync = \"never\"\n[cluster]\ndefault_replication_factor = \"all\"\n")
	if err != nil {
		t.Fatal(err)
	}
	if c.Storage.Fsync != "never" || c.Storage.SegmentBytes != Default().Storage.SegmentBytes {
		t.Fatalf("got %+v", c.Storage)
	}
}

func TestLoadFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.toml")
	if err := os.WriteFile(p, []byte("[node]\ndata_dir = \"/tmp/x\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(p)
	if err != nil || c.Node.DataDir != "/tmp/x" {
		t.Fatalf("c=%+v err=%v", c.Node, err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.toml")); err == nil {
		t.Fatal("missing file accepted")
	}
}

// TestEveryOptionDocumented fails when a TOML key has no entry in
// docs/configuration.md (written as `section.key` in a table row).
// The Kafka listener is on Kafka's port unless configured, and an empty
// address turns it off.
func TestKafkaAddr(t *testing.T) {
	if c := Default(); c.Node.KafkaAddr != "127.0.0.1:9092" || c.Roster()[0].KafkaAddr != c.Node.KafkaAddr {
		t.Fatalf("default kafka_addr %q, roster %q", c.Node.KafkaAddr, c.Roster()[0].KafkaAddr)
	}
	c, err := Parse("[node]\nkafka_addr = \"\"\n")
	if err != nil || c.Node.KafkaAddr != "" {
		t.Fatalf("empty kafka_addr: %v, %q", err, c.Node.KafkaAddr)
	}
}

func TestEveryOptionDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range keys(reflect.TypeOf(Config{}), "") {
		if !strings.Contains(string(doc), "`"+key+"`") {
			t.Errorf("docs/configuration.md does not document `%s`", key)
		}
	}
}

func keys(t reflect.Type, prefix string) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := f.Tag.Get("toml")
		if name == "" {
			continue
		}
		full := prefix + name
		ft := f.Type
		if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
			out = append(out, keys(ft.Elem(), full+"[].")...)
			continue
		}
		if ft.Kind() == reflect.Struct {
			out = append(out, keys(ft, full+".")...)
			continue
		}
		out = append(out, full)
	}
	return out
}

// TLSOn needs both a listener named and a certificate; the default names
// the HTTP API alone, as before the other listeners could serve TLS.
func TestTLSOn(t *testing.T) {
	c, err := Parse("[security]\ntls_cert_file = \"c\"\ntls_key_file = \"k\"\ntls_listeners = [\"client\", \"replication\"]\ntls_client_auth = \"request\"\ntls_ca_file = \"ca\"\n")
	if err != nil {
		t.Fatal(err)
	}
	for l, want := range map[string]bool{ListenerClient: true, ListenerReplication: true, ListenerKafka: false, ListenerHTTP: false} {
		if got := c.Security.TLSOn(l); got != want {
			t.Errorf("TLSOn(%s) = %v, want %v", l, got, want)
		}
	}
	d := Default()
	if d.Security.TLSOn(ListenerHTTP) || !slices.Equal(d.Security.TLSListeners, []string{ListenerHTTP}) {
		t.Errorf("default: %v", d.Security.TLSListeners)
	}
	d.Security.TLSCertFile, d.Security.TLSKeyFile = "c", "k"
	if !d.Security.TLSOn(ListenerHTTP) || d.Security.TLSOn(ListenerClient) {
		t.Error("default with a certificate: HTTP alone serves TLS")
	}
}
