package wire

// Config is one topic configuration entry given at creation.
//
//	key    string  at most ConfigKeyBytesMax bytes
//	value  string  at most ConfigValueBytesMax bytes
type Config struct {
	Key, Value string
}

func appendConfigs(dst []byte, cs []Config) []byte {
	dst = appendCount(dst, len(cs))
	for _, c := range cs {
		dst = appendString(dst, c.Key)
		dst = appendString(dst, c.Value)
	}
	return dst
}

func decodeConfigs(d *decoder, cs []Config) []Config {
	cs = grow(cs, d.count("configs", ConfigsMax, 4))
	for i := range cs {
		d.str("configs[].key", ConfigKeyBytesMax, &cs[i].Key)
		d.str("configs[].value", ConfigValueBytesMax, &cs[i].Value)
	}
	return cs
}

// CreateTopicRequest creates a topic. Sent to the metadata primary (others
// answer NOT_METADATA_PRIMARY with a hint).
//
// Body v0:
//
//	name                string
//	partitions          int32    1..PartitionsPerTopicMax
//	replication_factor  int16    0 = the cluster default, else 1..32
//	timeout_ms          uint32   0 = the server's default
//	validate_only       bool     check everything, create nothing
//	configs             array of Config
type CreateTopicRequest struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16
	TimeoutMs         uint32
	ValidateOnly      bool
	Configs           []Config
}

func (*CreateTopicRequest) isRequest() {}

// APIKey returns APICreateTopic.
func (*CreateTopicRequest) APIKey() APIKey { return APICreateTopic }

// AppendBody encodes the body.
func (r *CreateTopicRequest) AppendBody(dst []byte, version uint16) []byte {
	dst = appendString(dst, r.Name)
	dst = be.AppendUint32(dst, uint32(r.Partitions))
	dst = be.AppendUint16(dst, uint16(r.ReplicationFactor))
	dst = be.AppendUint32(dst, r.TimeoutMs)
	dst = appendBool(dst, r.ValidateOnly)
	return appendConfigs(dst, r.Configs)
}

// DecodeBody decodes the body.
func (r *CreateTopicRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APICreateTopic, version, false)
	d.str("name", TopicNameBytesMax, &r.Name)
	r.Partitions = d.i32("partitions")
	r.ReplicationFactor = d.i16("replication_factor")
	r.TimeoutMs = d.u32("timeout_ms")
	r.ValidateOnly = d.boolean("validate_only")
	r.Configs = decodeConfigs(&d, r.Configs)
	return d.done()
}

// Validate checks what needs no cluster state: the name
// (INVALID_TOPIC_NAME), the partition count (INVALID_PARTITIONS), the
// replication factor's range (INVALID_REPLICATION_FACTOR; the broker also
// checks it against the roster) and that config keys are present and
// distinct (INVALID_CONFIG; the broker checks keys and values).
func (r *CreateTopicRequest) Validate() error {
	if err := ValidateTopicName(r.Name); err != nil {
		return err
	}
	if r.Partitions < 1 || r.Partitions > PartitionsPerTopicMax {
		return Errorf(ErrInvalidPartitions, "topic %s: %d partitions is outside 1..%d", r.Name, r.Partitions, PartitionsPerTopicMax)
	}
	if r.ReplicationFactor < 0 || r.ReplicationFactor > ReplicationFactorMax {
		return Errorf(ErrInvalidReplicationFactor, "topic %s: replication factor %d is outside 0 (cluster default) or 1..%d",
			r.Name, r.ReplicationFactor, ReplicationFactorMax)
	}
	for i, c := range r.Configs {
		if c.Key == "" {
			return Errorf(ErrInvalidConfig, "topic %s: config entry %d has an empty key", r.Name, i)
		}
		for _, prev := range r.Configs[:i] {
			if prev.Key == c.Key {
				return Errorf(ErrInvalidConfig, "topic %s: config key %q given twice", r.Name, c.Key)
			}
		}
	}
	return nil
}

// CreateTopicResponse answers CreateTopic (also for validate_only, with a
// zero topic id).
//
// Body v0:
//
//	topic_id            uuid
//	partitions          int32
//	replication_factor  int16   the factor chosen (the default resolved)
type CreateTopicResponse struct {
	TopicID           TopicID
	Partitions        int32
	ReplicationFactor int16
}

func (*CreateTopicResponse) isResponse() {}

// APIKey returns APICreateTopic.
func (*CreateTopicResponse) APIKey() APIKey { return APICreateTopic }

// AppendBody encodes the body.
func (r *CreateTopicResponse) AppendBody(dst []byte, version uint16) []byte {
	dst = append(dst, r.TopicID[:]...)
	dst = be.AppendUint32(dst, uint32(r.Partitions))
	return be.AppendUint16(dst, uint16(r.ReplicationFactor))
}

// DecodeBody decodes the body.
func (r *CreateTopicResponse) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APICreateTopic, version, true)
	r.TopicID = d.uuid("topic_id")
	r.Partitions = d.i32("partitions")
	r.ReplicationFactor = d.i16("replication_factor")
	return d.done()
}

// DeleteTopicRequest deletes a topic. Sent to the metadata primary.
//
// Body v0:
//
//	name        string
//	topic_id    uuid     zero = delete whatever topic has the name; else
//	                     only that topic (UNKNOWN_TOPIC_OR_PARTITION if the
//	                     name now belongs to another)
//	timeout_ms  uint32
type DeleteTopicRequest struct {
	Name      string
	TopicID   TopicID
	TimeoutMs uint32
}

func (*DeleteTopicRequest) isRequest() {}

// APIKey returns APIDeleteTopic.
func (*DeleteTopicRequest) APIKey() APIKey { return APIDeleteTopic }

// AppendBody encodes the body.
func (r *DeleteTopicRequest) AppendBody(dst []byte, version uint16) []byte {
	dst = appendString(dst, r.Name)
	dst = append(dst, r.TopicID[:]...)
	return be.AppendUint32(dst, r.TimeoutMs)
}

// DecodeBody decodes the body.
func (r *DeleteTopicRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIDeleteTopic, version, false)
	d.str("name", TopicNameBytesMax, &r.Name)
	r.TopicID = d.uuid("topic_id")
	r.TimeoutMs = d.u32("timeout_ms")
	return d.done()
}

// DeleteTopicResponse answers DeleteTopic.
//
// Body v0:
//
//	topic_id  uuid  the id of the topic deleted
type DeleteTopicResponse struct {
	TopicID TopicID
}

func (*DeleteTopicResponse) isResponse() {}

// APIKey returns APIDeleteTopic.
func (*DeleteTopicResponse) APIKey() APIKey { return APIDeleteTopic }

// AppendBody encodes the body.
func (r *DeleteTopicResponse) AppendBody(dst []byte, version uint16) []byte {
	return append(dst, r.TopicID[:]...)
}

// DecodeBody decodes the body.
func (r *DeleteTopicResponse) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIDeleteTopic, version, true)
	r.TopicID = d.uuid("topic_id")
	return d.done()
}

// ListTopicsRequest lists every topic. Body v0 is empty.
type ListTopicsRequest struct{}

func (*ListTopicsRequest) isRequest() {}

// APIKey returns APIListTopics.
func (*ListTopicsRequest) APIKey() APIKey { return APIListTopics }

// AppendBody encodes the (empty) body.
func (r *ListTopicsRequest) AppendBody(dst []byte, version uint16) []byte { return dst }

// DecodeBody checks that the body is empty.
func (r *ListTopicsRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIListTopics, version, false)
	return d.done()
}

// TopicSummary is one entry of ListTopics.
//
//	name                string
//	topic_id            uuid
//	partitions          int32
//	replication_factor  int16
type TopicSummary struct {
	Name              string
	ID                TopicID
	Partitions        int32
	ReplicationFactor int16
}

// ListTopicsResponse answers ListTopics, sorted by name.
//
// Body v0:
//
//	topics  array of TopicSummary
type ListTopicsResponse struct {
	Topics []TopicSummary
}

func (*ListTopicsResponse) isResponse() {}

// APIKey returns APIListTopics.
func (*ListTopicsResponse) APIKey() APIKey { return APIListTopics }

// AppendBody encodes the body.
func (r *ListTopicsResponse) AppendBody(dst []byte, version uint16) []byte {
	dst = appendCount(dst, len(r.Topics))
	for _, t := range r.Topics {
		dst = appendString(dst, t.Name)
		dst = append(dst, t.ID[:]...)
		dst = be.AppendUint32(dst, uint32(t.Partitions))
		dst = be.AppendUint16(dst, uint16(t.ReplicationFactor))
	}
	return dst
}

// DecodeBody decodes the body.
func (r *ListTopicsResponse) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIListTopics, version, true)
	r.Topics = grow(r.Topics, d.count("topics", TopicsMax, 2+16+4+2))
	for i := range r.Topics {
		t := &r.Topics[i]
		d.str("name", TopicNameBytesMax, &t.Name)
		t.ID = d.uuid("topic_id")
		t.Partitions = d.i32("partitions")
		t.ReplicationFactor = d.i16("replication_factor")
	}
	return d.done()
}

// DescribeTopicRequest asks for one topic's routes and configuration.
//
// Body v0:
//
//	name  string
type DescribeTopicRequest struct {
	Name string
}

func (*DescribeTopicRequest) isRequest() {}

// APIKey returns APIDescribeTopic.
func (*DescribeTopicRequest) APIKey() APIKey { return APIDescribeTopic }

// AppendBody encodes the body.
func (r *DescribeTopicRequest) AppendBody(dst []byte, version uint16) []byte {
	return appendString(dst, r.Name)
}

// DecodeBody decodes the body.
func (r *DescribeTopicRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIDescribeTopic, version, false)
	d.str("name", TopicNameBytesMax, &r.Name)
	return d.done()
}

// ConfigEntry is one effective topic configuration value.
//
//	key         string
//	value       string
//	is_default  bool    true when the topic did not override it
type ConfigEntry struct {
	Key, Value string
	IsDefault  bool
}

// DescribeTopicResponse answers DescribeTopic. A missing topic is answered
// with the error UNKNOWN_TOPIC_OR_PARTITION, not with a topic error code.
//
// Body v0:
//
//	topic    TopicMetadata
//	configs  array of ConfigEntry, sorted by key
type DescribeTopicResponse struct {
	Topic   TopicMetadata
	Configs []ConfigEntry
}

func (*DescribeTopicResponse) isResponse() {}

// APIKey returns APIDescribeTopic.
func (*DescribeTopicResponse) APIKey() APIKey { return APIDescribeTopic }

// AppendBody encodes the body.
func (r *DescribeTopicResponse) AppendBody(dst []byte, version uint16) []byte {
	dst = r.Topic.append(dst)
	dst = appendCount(dst, len(r.Configs))
	for _, c := range r.Configs {
		dst = appendString(dst, c.Key)
		dst = appendString(dst, c.Value)
		dst = appendBool(dst, c.IsDefault)
	}
	return dst
}

// DecodeBody decodes the body.
func (r *DescribeTopicResponse) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIDescribeTopic, version, true)
	r.Topic.decode(&d)
	r.Configs = grow(r.Configs, d.count("configs", ConfigsMax, 5))
	for i := range r.Configs {
		c := &r.Configs[i]
		d.str("configs[].key", ConfigKeyBytesMax, &c.Key)
		d.str("configs[].value", ConfigValueBytesMax, &c.Value)
		c.IsDefault = d.boolean("configs[].is_default")
	}
	return d.done()
}

// AddPartitionsRequest raises a topic's partition count. It carries the
// new total rather than an increment, so that a retry after a timeout
// cannot add twice. Sent to the metadata primary. The replication factor is
// kept.
//
// Body v0:
//
//	name           string
//	topic_id       uuid     zero = do not check
//	partitions     int32    the new total, above the current count
//	timeout_ms     uint32
//	validate_only  bool
type AddPartitionsRequest struct {
	Name         string
	TopicID      TopicID
	Partitions   int32
	TimeoutMs    uint32
	ValidateOnly bool
}

func (*AddPartitionsRequest) isRequest() {}

// APIKey returns APIAddPartitions.
func (*AddPartitionsRequest) APIKey() APIKey { return APIAddPartitions }

// AppendBody encodes the body.
func (r *AddPartitionsRequest) AppendBody(dst []byte, version uint16) []byte {
	dst = appendString(dst, r.Name)
	dst = append(dst, r.TopicID[:]...)
	dst = be.AppendUint32(dst, uint32(r.Partitions))
	dst = be.AppendUint32(dst, r.TimeoutMs)
	return appendBool(dst, r.ValidateOnly)
}

// DecodeBody decodes the body.
func (r *AddPartitionsRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIAddPartitions, version, false)
	d.str("name", TopicNameBytesMax, &r.Name)
	r.TopicID = d.uuid("topic_id")
	r.Partitions = d.i32("partitions")
	r.TimeoutMs = d.u32("timeout_ms")
	r.ValidateOnly = d.boolean("validate_only")
	return d.done()
}

// Validate checks the name and that the total is within 1..PartitionsPerTopicMax.
func (r *AddPartitionsRequest) Validate() error {
	if err := ValidateTopicName(r.Name); err != nil {
		return err
	}
	if r.Partitions < 1 || r.Partitions > PartitionsPerTopicMax {
		return Errorf(ErrInvalidPartitions, "topic %s: %d partitions is outside 1..%d", r.Name, r.Partitions, PartitionsPerTopicMax)
	}
	return nil
}

// AddPartitionsResponse answers AddPartitions.
//
// Body v0:
//
//	partitions  int32  the topic's partition count now
type AddPartitionsResponse struct {
	Partitions int32
}

func (*AddPartitionsResponse) isResponse() {}

// APIKey returns APIAddPartitions.
func (*AddPartitionsResponse) APIKey() APIKey { return APIAddPartitions }

// AppendBody encodes the body.
func (r *AddPartitionsResponse) AppendBody(dst []byte, version uint16) []byte {
	return be.AppendUint32(dst, uint32(r.Partitions))
}

// DecodeBody decodes the body.
func (r *AddPartitionsResponse) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIAddPartitions, version, true)
	r.Partitions = d.i32("partitions")
	return d.done()
}
