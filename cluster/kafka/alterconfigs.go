package kafka

import (
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio"
)

// Kafka's API keys for changing configs.
const (
	alterConfigsKey            int16 = 33
	incrementalAlterConfigsKey int16 = 44
)

// ourConfigKey is our name of a Kafka topic config (retention.ms →
// retention_ms; ours are accepted too), or ErrInvalidConfig for one we
// do not have.
func ourConfigKey(topic, name string) (string, error) {
	if ours, ok := configKeys[name]; ok {
		return ours, nil
	}
	for _, ours := range configKeys {
		if name == ours {
			return ours, nil
		}
	}
	return "", service.Errorf(service.ErrInvalidConfig, "topic %s: config %q is not supported (supported: %s; fixed: %s)",
		topic, name, strings.Join(supportedConfigNames(), ", "), strings.Join(fixedConfigNames(), ", "))
}

// fixedConfigs are Kafka topic configs whose one value is what corestream
// always does: a create or alter that gives that value (or asks for the
// default) is accepted and changes nothing; another value is refused with
// the reason, since accepting it would promise what is not done.
var fixedConfigs = map[string]struct{ value, why string }{
	"message.timestamp.type":         {"CreateTime", "records keep their producers' timestamps; the broker does not stamp its own (LogAppendTime)"},
	"compression.type":               {"producer", "batches are stored as produced and never recompressed by the broker"},
	"unclean.leader.election.enable": {"false", "consensus never elects a primary that may lack committed records"},
}

// topicConfigKey is our key of Kafka topic config name given value (nil:
// back to the default), or skip for a fixed config given its one value or
// none, or ErrInvalidConfig naming the config and why.
func topicConfigKey(topic, name string, value *string) (key string, skip bool, err error) {
	if f, ok := fixedConfigs[name]; ok {
		if value == nil || strings.EqualFold(*value, f.value) {
			return "", true, nil
		}
		return "", false, service.Errorf(service.ErrInvalidConfig, "topic %s: config %s=%s is not supported: %s (only %s)", topic, name, *value, f.why, f.value)
	}
	key, err = ourConfigKey(topic, name)
	return key, false, err
}

// supportedConfigNames are the Kafka names of the configs a topic may set.
func supportedConfigNames() []string { return sortedKeys(configKeys) }

// fixedConfigNames are the fixed configs' names with their one value.
func fixedConfigNames() []string {
	names := make([]string, 0, len(fixedConfigs))
	for k, f := range fixedConfigs {
		names = append(names, k+"="+f.value)
	}
	sort.Strings(names)
	return names
}

// alterResource is one resource of an AlterConfigs or
// IncrementalAlterConfigs request, as the service's request, or the
// error code and message to answer it with.
type alterResource struct {
	req  *service.AlterTopicConfigRequest
	code int16
	msg  string
}

// topicResource checks that a resource is a topic: a broker's configs
// are the node's file, not changed at run time.
func topicResource(typ kmsg.ConfigResourceType, name string) *alterResource {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		return &alterResource{req: &service.AlterTopicConfigRequest{Name: name, Timeout: adminTimeoutDefault}}
	case kmsg.ConfigResourceTypeBroker:
		return &alterResource{code: kerr.InvalidRequest.Code, msg: "broker configs are the node's configuration file; only topic configs change at run time"}
	}
	return &alterResource{code: kerr.InvalidRequest.Code, msg: "only topic configs are served"}
}

// incrementalAlterConfigs changes the named configs of each topic
// (SET, DELETE back to the default; APPEND and SUBTRACT are for list
// configs, which we have none of) through the metadata group, so that
// every node applies them at run time.
func (l *Listener) incrementalAlterConfigs(c *netio.Conn, req *kmsg.IncrementalAlterConfigsRequest, reply func(kmsg.Response)) {
	res := make([]*alterResource, len(req.Resources))
	for i, r := range req.Resources {
		ar := topicResource(r.ResourceType, r.ResourceName)
		res[i] = ar
		for _, cfg := range r.Configs {
			if ar.req == nil {
				break
			}
			key, skip, err := topicConfigKey(r.ResourceName, cfg.Name, cfg.Value)
			switch {
			case err != nil:
			case skip:
			case cfg.Op == kmsg.IncrementalAlterConfigOpSet && cfg.Value != nil:
				ar.req.Set = append(ar.req.Set, service.Config{Key: key, Value: *cfg.Value})
			case cfg.Op == kmsg.IncrementalAlterConfigOpDelete:
				ar.req.Reset = append(ar.req.Reset, key)
			default:
				err = service.Errorf(service.ErrInvalidConfig, "topic %s: %s of %s: only SET (with a value) and DELETE apply to it", r.ResourceName, cfg.Op, cfg.Name)
			}
			if err != nil {
				*ar = alterResource{code: errorCode(err), msg: err.Error()}
			}
		}
	}
	l.alterConfigs(c, res, req.ValidateOnly, func() {
		resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
		for i, r := range req.Resources {
			rr := kmsg.NewIncrementalAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
			rr.ErrorCode, rr.ErrorMessage = res[i].code, messagePtr(res[i].msg)
			resp.Resources = append(resp.Resources, rr)
		}
		reply(resp)
	})
}

// alterConfigsLegacy is AlterConfigs: each topic's configs become exactly
// those given, the others back to their defaults.
func (l *Listener) alterConfigsLegacy(c *netio.Conn, req *kmsg.AlterConfigsRequest, reply func(kmsg.Response)) {
	res := make([]*alterResource, len(req.Resources))
	for i, r := range req.Resources {
		ar := topicResource(r.ResourceType, r.ResourceName)
		res[i] = ar
		if ar.req == nil {
			continue
		}
		ar.req.Replace = true
		for _, cfg := range r.Configs {
			key, skip, err := topicConfigKey(r.ResourceName, cfg.Name, cfg.Value)
			if err != nil {
				*ar = alterResource{code: errorCode(err), msg: err.Error()}
				break
			}
			if !skip && cfg.Value != nil {
				ar.req.Set = append(ar.req.Set, service.Config{Key: key, Value: *cfg.Value})
			}
		}
	}
	l.alterConfigs(c, res, req.ValidateOnly, func() {
		resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
		for i, r := range req.Resources {
			rr := kmsg.NewAlterConfigsResponseResource()
			rr.ResourceType, rr.ResourceName = r.ResourceType, r.ResourceName
			rr.ErrorCode, rr.ErrorMessage = res[i].code, messagePtr(res[i].msg)
			resp.Resources = append(resp.Resources, rr)
		}
		reply(resp)
	})
}

// alterConfigs sends each topic resource's change to the service and
// runs done once all have answered, their outcomes in res.
func (l *Listener) alterConfigs(c *netio.Conn, res []*alterResource, validateOnly bool, done func()) {
	pending := 1
	finish := func() {
		if pending--; pending == 0 {
			done()
		}
	}
	for _, ar := range res {
		if ar.req == nil {
			continue
		}
		ar.req.ValidateOnly = validateOnly
		pending++
		l.svc.AlterTopicConfig(c.Shard(), ar.req, func(_ metadata.TopicConfig, err error) {
			if err != nil {
				ar.code, ar.msg = errorCode(err), *kafkaConfigNames(kmsg.StringPtr(err.Error()))
			}
			finish()
		})
	}
	finish()
}

// messagePtr is msg as a nullable string: null when empty.
func messagePtr(msg string) *string {
	if msg == "" {
		return nil
	}
	return &msg
}
