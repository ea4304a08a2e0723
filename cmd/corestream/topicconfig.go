package main

import (
	"strconv"
	"strings"
)

// topicSetting is one per-topic setting `topic create --config` accepts.
type topicSetting struct {
	// key is the broker's name (what `topic describe` shows).
	key string
	// kafka is the name Kafka tools use for the same setting.
	kafka string
	// free: the value is not an integer (the broker checks it).
	free bool
}

// topicSettings are the broker's per-topic overrides
// (cluster/node/api_admin.go, topicConfig): integers, where 0 means the
// node's storage default and -1 no limit (retention only), but for the free ones
// (cleanup_policy: delete, compact or compact,delete; a ratio).
var topicSettings = []topicSetting{
	{key: "retention_ms", kafka: "retention.ms"},
	{key: "retention_bytes", kafka: "retention.bytes"},
	// Compaction (docs/design/compaction.md).
	{key: "cleanup_policy", kafka: "cleanup.policy", free: true},
	{key: "min_cleanable_dirty_ratio", kafka: "min.cleanable.dirty.ratio", free: true},
	{key: "delete_retention_ms", kafka: "delete.retention.ms"},
	{key: "min_compaction_lag_ms", kafka: "min.compaction.lag.ms"},
	{key: "max_compaction_lag_ms", kafka: "max.compaction.lag.ms"},
	// Segments and batches.
	{key: "segment_bytes", kafka: "segment.bytes"},
	{key: "segment_ms", kafka: "segment.ms"},
	{key: "max_message_bytes", kafka: "max.message.bytes"},
}

// nodeSettings are Kafka topic settings that corestream sets per node
// only: each names the node setting (docs/configuration.md) to use.
var nodeSettings = map[string]string{
	"fsync":          "storage.fsync",
	"flush.messages": "storage.fsync",
	"flush.ms":       "storage.fsync",
}

// acceptedTopicSettings lists the accepted names for error messages.
func acceptedTopicSettings() string {
	var names []string
	for _, s := range topicSettings {
		names = append(names, s.kafka+" (or "+s.key+")")
	}
	return strings.Join(names, ", ")
}

// parseTopicConfigs turns `--config KEY=VALUE` arguments into the broker's
// topic settings: Kafka's dotted names map onto ours, and a key the broker
// would refuse is a usage error that lists the accepted ones (or, for a
// Kafka setting that is per node here, names the node setting).
func parseTopicConfigs(args []string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range args {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageErrorf("--config %q is not KEY=VALUE", kv)
		}
		key, free := "", false
		for _, s := range topicSettings {
			if k == s.key || k == s.kafka {
				key, free = s.key, s.free
			}
		}
		if key == "" {
			if node, ok := nodeSettings[k]; ok {
				return nil, usageErrorf("--config %s: corestream sets this per node, not per topic (%s in the node's configuration); topic settings: %s",
					k, node, acceptedTopicSettings())
			}
			return nil, usageErrorf("--config %s: unknown topic setting; accepted: %s", k, acceptedTopicSettings())
		}
		if _, err := strconv.ParseInt(v, 10, 64); err != nil && !free {
			return nil, usageErrorf("--config %s=%q: the value must be an integer (-1: no limit)", k, v)
		}
		if _, dup := out[key]; dup {
			return nil, usageErrorf("--config sets %s twice", key)
		}
		out[key] = v
	}
	return out, nil
}
