package wire

// HomeRequest asks the node to serve this connection from now on on the
// shard that owns one partition, so that the requests for that partition
// (and every other partition of the same shard) run where they are read,
// without a hand-off to another thread and back. A client that keeps one
// connection per shard and sends each partition's requests on its shard's
// connection crosses no thread on the data path. The node answers on the
// new shard, after the move; nothing may be in flight on the connection
// when it is sent (a node answers INVALID_REQUEST otherwise), unless Stay.
//
// Body v0:
//
//	partition reference  (topic, topic_id, partition, generation); only
//	                     the topic name and partition choose the shard
//	stay  bool           answer only, do not move the connection: how a
//	                     client learns a partition's shard on a busy
//	                     connection, to reuse a connection it already has
//	                     on that shard instead of dialling one
type HomeRequest struct {
	PartitionRef
	// Stay asks for the answer without the move.
	Stay bool
}

func (*HomeRequest) isRequest() {}

// APIKey returns APIHome.
func (*HomeRequest) APIKey() APIKey { return APIHome }

// AppendBody encodes the body.
func (r *HomeRequest) AppendBody(dst []byte, version uint16) []byte {
	return appendBool(r.PartitionRef.append(dst), r.Stay)
}

// DecodeBody decodes the body.
func (r *HomeRequest) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIHome, version, false)
	r.PartitionRef.decode(&d)
	r.Stay = d.boolean("stay")
	return d.done()
}

// Validate checks the PartitionRef.
func (r *HomeRequest) Validate() error { return r.PartitionRef.Validate() }

// HomeResponse answers a Home request.
//
// Body v0:
//
//	shard   uint16  the shard now serving the connection, 0..shards-1
//	shards  uint16  how many shards the node runs
//
// A client keys its connection by (node, shard): a second partition whose
// Home answer names a shard it already has a connection to goes on that one.
type HomeResponse struct {
	Shard  uint16
	Shards uint16
}

func (*HomeResponse) isResponse() {}

// APIKey returns APIHome.
func (*HomeResponse) APIKey() APIKey { return APIHome }

// AppendBody encodes the body.
func (r *HomeResponse) AppendBody(dst []byte, version uint16) []byte {
	dst = be.AppendUint16(dst, r.Shard)
	return be.AppendUint16(dst, r.Shards)
}

// DecodeBody decodes the body.
func (r *HomeResponse) DecodeBody(body []byte, version uint16) error {
	d := newDecoder(body, APIHome, version, true)
	r.Shard = d.u16("shard")
	r.Shards = d.u16("shards")
	return d.done()
}
