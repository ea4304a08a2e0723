package kafka

import (
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
	return "", service.Errorf(service.ErrInvalidConfig, "topic %s: config %q cannot be changed (supported: retention.ms, retention.bytes)", topic, name)
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
			key, err := ourConfigKey(r.ResourceName, cfg.Name)
			switch {
			case err != nil:
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
			key, err := ourConfigKey(r.ResourceName, cfg.Name)
			if err != nil {
				*ar = alterResource{code: errorCode(err), msg: err.Error()}
				break
			}
			if cfg.Value != nil {
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
				ar.code, ar.msg = errorCode(err), err.Error()
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
