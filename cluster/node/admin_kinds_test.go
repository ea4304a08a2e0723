package node

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/netio/wire"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestAdminRulesSameKindEverywhere: each admin rule (the name, the
// partition count, the replication factor's range and the roster, the
// configs) is the service's (cluster/service/validate.go) and answers the
// same kind through the native protocol, HTTP and the Kafka listener,
// each in its own codes; and nothing refused was created.
func TestAdminRulesSameKindEverywhere(t *testing.T) {
	n := runNode(t, t.TempDir(), func(c *config.Config) {
		c.Node.HTTPAddr = "127.0.0.1:0"
		withKafka(c)
	})
	rc := dialHandshaken(t, n.ClientAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(kafkaClient(t, []string{n.KafkaAddr()}))
	waitFor(t, 20*time.Second, "the metadata loaded", func() bool {
		var resp wire.CreateTopicResponse
		err := rc.call(&wire.CreateTopicRequest{Name: "ok", Partitions: 1}, &resp)
		return err == nil || errors.Is(err, wire.ErrTopicAlreadyExists)
	})
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name       string
		topic      string
		partitions int32
		rf         int16
		configs    map[string]string
		code       *wire.Error // the native and HTTP code
		kafka      *kerr.Error
	}{
		{"name with a slash", "a/b", 1, 1, nil, wire.ErrInvalidTopicName, kerr.InvalidTopicException},
		{"internal name", "__mine", 1, 1, nil, wire.ErrInvalidTopicName, kerr.InvalidTopicException},
		{"no partitions", "p0", 0, 1, nil, wire.ErrInvalidPartitions, kerr.InvalidPartitions},
		{"too many partitions", "p1", 16385, 1, nil, wire.ErrInvalidPartitions, kerr.InvalidPartitions},
		{"factor over the roster", "rf2", 1, 2, nil, wire.ErrInvalidReplicationFactor, kerr.InvalidReplicationFactor},
		{"factor 33", "rf33", 1, 33, nil, wire.ErrInvalidReplicationFactor, kerr.InvalidReplicationFactor},
		{"unknown config", "c1", 1, 1, map[string]string{"colour": "1"}, wire.ErrInvalidConfig, kerr.InvalidConfig},
		{"config not a number", "c2", 1, 1, map[string]string{"retention_ms": "soon"}, wire.ErrInvalidConfig, kerr.InvalidConfig},
		{"config below -1", "c3", 1, 1, map[string]string{"retention_bytes": "-2"}, wire.ErrInvalidConfig, kerr.InvalidConfig},
	} {
		// Native.
		req := &wire.CreateTopicRequest{Name: tc.topic, Partitions: tc.partitions, ReplicationFactor: tc.rf}
		for k, v := range tc.configs {
			req.Configs = append(req.Configs, wire.Config{Key: k, Value: v})
		}
		var resp wire.CreateTopicResponse
		if err := rc.call(req, &resp); !errors.Is(err, tc.code) {
			t.Errorf("%s: native answered %v, want %s", tc.name, err, tc.code.Name)
		}
		// HTTP.
		body := map[string]any{"name": tc.topic, "partitions": tc.partitions, "replication_factor": tc.rf}
		if tc.configs != nil {
			body["config"] = tc.configs
		}
		b, _ := json.Marshal(body)
		status, _, out := httpRaw(t, "POST", "http://"+n.HTTPAddr()+"/v1/topics", string(b), nil)
		var answer struct {
			Error struct{ Code string } `json:"error"`
		}
		if err := json.Unmarshal(out, &answer); err != nil || status == http.StatusCreated || answer.Error.Code != tc.code.Name {
			t.Errorf("%s: HTTP answered %d %s, want %s", tc.name, status, out, tc.code.Name)
		}
		// Kafka.
		cfgs := map[string]*string{}
		for k, v := range tc.configs {
			cfgs[k] = str(v)
		}
		res, err := adm.CreateTopic(ctx, tc.partitions, tc.rf, cfgs, tc.topic)
		if err == nil {
			err = res.Err
		}
		if !errors.Is(err, tc.kafka) {
			t.Errorf("%s: Kafka answered %v (%s), want %s", tc.name, err, res.ErrMessage, tc.kafka.Message)
		}
	}
	if md := rc.metadata(); len(md.Topics) != 1 {
		t.Errorf("refused creations left topics: %+v", md.Topics)
	}
}
