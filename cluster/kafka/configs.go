package kafka

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaConfigName is the Kafka name of our topic config key (ours where
// Kafka has none, like fsync, a policy rather than Kafka's flush.*).
func kafkaConfigName(ours string) string {
	for k, o := range configKeys {
		if o == ours {
			return k
		}
	}
	return ours
}

// BrokerConfig is one of a node's configs under Kafka's broker config
// name, with the node's setting it comes from.
type BrokerConfig struct {
	Name, Value string
	// Doc names corestream's setting (DescribeConfigs' documentation).
	Doc string
}

// sortedKeys is m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// describeConfigs answers a topic's effective configs (DescribeTopic's)
// under Kafka's names, and this node's broker configs (Config.BrokerConfigs);
// other resources are INVALID_REQUEST. Retention can be changed (alterconfigs.go); the
// others are read-only.
func (l *Listener) describeConfigs(req *kmsg.DescribeConfigsRequest) *kmsg.DescribeConfigsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, r := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
		switch r.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			desc, err := l.svc.DescribeTopic(r.ResourceName)
			if err != nil {
				rr.ErrorCode, rr.ErrorMessage = errorCode(err), errorMessage(err)
				break
			}
			want := map[string]bool{}
			for _, n := range r.ConfigNames {
				want[n] = true
			}
			for _, c := range desc.Configs {
				name := kafkaConfigName(c.Key)
				if r.ConfigNames != nil && !want[name] {
					continue
				}
				rc := kmsg.NewDescribeConfigsResponseResourceConfig()
				_, alterable := configKeys[name]
				rc.Name, rc.Value, rc.ReadOnly, rc.IsDefault = name, kmsg.StringPtr(c.Value), !alterable, c.IsDefault
				rc.Source = kmsg.ConfigSourceDynamicTopicConfig
				if c.IsDefault {
					rc.Source = kmsg.ConfigSourceDefaultConfig
				}
				rr.Configs = append(rr.Configs, rc)
			}
			for _, name := range sortedKeys(fixedConfigs) {
				if r.ConfigNames != nil && !want[name] {
					continue
				}
				rc := kmsg.NewDescribeConfigsResponseResourceConfig()
				rc.Name, rc.Value, rc.ReadOnly, rc.IsDefault = name, kmsg.StringPtr(fixedConfigs[name].value), true, true
				rc.Source = kmsg.ConfigSourceDefaultConfig
				rr.Configs = append(rr.Configs, rc)
			}
		case kmsg.ConfigResourceTypeBroker:
			if r.ResourceName != "" && r.ResourceName != strconv.Itoa(int(l.cfg.NodeID)) {
				rr.ErrorCode = kerr.InvalidRequest.Code
				rr.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("this is node %d: ask node %s for its own configs", l.cfg.NodeID, r.ResourceName))
				break
			}
			want := map[string]bool{}
			for _, n := range r.ConfigNames {
				want[n] = true
			}
			for _, bc := range l.cfg.BrokerConfigs {
				if r.ConfigNames != nil && !want[bc.Name] {
					continue
				}
				rc := kmsg.NewDescribeConfigsResponseResourceConfig()
				rc.Name, rc.Value, rc.ReadOnly = bc.Name, kmsg.StringPtr(bc.Value), true
				rc.Source = kmsg.ConfigSourceStaticBrokerConfig
				if req.IncludeDocumentation && bc.Doc != "" {
					rc.Documentation = kmsg.StringPtr(bc.Doc)
				}
				rr.Configs = append(rr.Configs, rc)
			}
		default:
			rr.ErrorCode = kerr.InvalidRequest.Code
			rr.ErrorMessage = kmsg.StringPtr("only topic configs are served")
		}
		resp.Resources = append(resp.Resources, rr)
	}
	return resp
}
