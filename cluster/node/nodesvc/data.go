package nodesvc

import (
	"slices"

	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/routes"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/segment"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"
)

// The service's data calls: each finds the partition in the View on the
// caller's goroutine, then runs on the shard that owns it (runOn).

// Produce implements service.Data. The broker's internal topics are
// written by the broker only (ProduceInternal).
func (s *Service) Produce(from *shard.Shard, req *service.ProduceRequest, done func(service.ProduceResult, error)) {
	if metadata.IsInternalTopic(req.Topic) {
		done(service.ProduceResult{}, service.Errorf(service.ErrAuthorization,
			"topic %q is the broker's own (consumer groups' state); clients may read it but not write it", req.Topic))
		return
	}
	s.ProduceInternal(from, req, done)
}

// ProduceInternal is Produce without the internal topics' refusal: the
// group coordinators write their log with it.
func (s *Service) ProduceInternal(from *shard.Shard, req *service.ProduceRequest, done func(service.ProduceResult, error)) {
	done = s.meterProduce(len(req.Records), done)
	args := partition.ProduceArgs{Generation: req.Generation, AcksPrimary: req.Acks == service.AcksPrimary,
		Timeout: req.Timeout, Records: req.Records, Lend: req.Lend}
	if len(args.Records) > service.RecordsBytesMax {
		done(service.ProduceResult{}, service.Errorf(partition.ErrBatchTooLarge, "record batch of %d bytes exceeds the maximum %d",
			len(args.Records), service.RecordsBytesMax))
		return
	}
	// On another shard the batch is a copy (the caller's buffer is not
	// the owner's to hold).
	detach := func() { args.Records, args.Lend = append([]byte(nil), args.Records...), nil }
	onReplica(s, from, req.PartitionRef, detach, func(r *partition.Replica, t *metadata.Topic, reply func(service.ProduceResult, error)) {
		r.Produce(&args, func(res partition.ProduceResult) {
			p := res.Produced
			reply(service.ProduceResult{BaseOffset: p.BaseOffset, LogAppendTimeMs: p.LogAppendTimeMs, LogStartOffset: p.LogStartOffset}, res.Err)
		})
	}, done)
}

// Fetch implements service.Data. A fetch with a rack is a follower read
// where it can be (docs/design/replication.md, "Follower reads"): the
// primary names an in-sync replica of the consumer's rack instead of
// answering with records, and a follower in the in-sync set serves it up
// to its own high watermark.
func (s *Service) Fetch(from *shard.Shard, req *service.FetchRequest, done func(service.FetchResult, error)) {
	done = s.meterFetch(done)
	args := partition.FetchArgs{Generation: req.Generation, Offset: req.Offset,
		MaxBytes: min(req.MaxBytes, service.RecordsBytesMax), MinBytes: req.MinBytes, MaxWait: min(req.MaxWait, service.FetchWaitMax),
		Follower: req.Rack != "", ReadCommitted: req.Isolation == service.IsolationReadCommitted}
	rack, p := req.Rack, req.Partition
	onReplica(s, from, req.PartitionRef, nil, func(r *partition.Replica, t *metadata.Topic, reply func(service.FetchResult, error)) {
		if s.d.Stopping() {
			args.MaxWait = 0 // stopping: no new long polls (Stop answered the parked ones)
		}
		follower := false
		if rack != "" {
			if r.IsPrimary() {
				if id := s.preferredReadReplica(t, p, rack); id != service.NoReplica && r.CheckRoute(args.Generation) == nil {
					// No records: the consumer reads them from id, and
					// this primary spends nothing on them.
					reply(service.FetchResult{HighWatermark: r.HighWatermark(), LogStartOffset: r.StartOffset(),
						LastStableOffset: r.LastStableOffset(), PreferredReadReplica: id}, nil)
					return
				}
			} else if err := s.followerMayServe(t, p); err != nil {
				reply(service.FetchResult{PreferredReadReplica: service.NoReplica}, err)
				return
			} else {
				follower = true
			}
		}
		r.Fetch(&args, func(res partition.FetchResult) {
			if res.Err == nil && follower {
				s.followerReads.Add(1)
			}
			reply(service.FetchResult{HighWatermark: res.HighWatermark, LogStartOffset: res.LogStartOffset,
				LastStableOffset: res.LastStableOffset, Aborted: abortedOf(res.Aborted),
				Records: service.Records{Spans: res.Spans, Bytes: res.Bytes}, PreferredReadReplica: service.NoReplica,
				ServedByFollower: follower && res.Err == nil}, res.Err)
		})
	}, done)
}

// abortedOf is a fetch's aborted transactions as the service answers
// them (nil for none).
func abortedOf(a []partition.AbortedTxn) []service.AbortedTxn {
	if len(a) == 0 {
		return nil
	}
	out := make([]service.AbortedTxn, len(a))
	for i, t := range a {
		out[i] = service.AbortedTxn{ProducerID: t.ProducerID, FirstOffset: t.FirstOffset}
	}
	return out
}

// preferredReadReplica is the replica of partition p of t that a consumer
// in rack should fetch from instead of this primary: the first, in
// replica order, that stands in that rack, is alive and is in the
// in-sync set; NoReplica when this node stands in the rack itself (it
// serves best) or none qualifies.
func (s *Service) preferredReadReplica(t *metadata.Topic, p int32, rack string) int32 {
	if s.rackOf(int32(s.d.Self)) == rack {
		return service.NoReplica
	}
	rt, ok := s.d.Routes.Get(routes.Key(t.ID, p))
	if !ok {
		return service.NoReplica
	}
	for _, id := range t.Replicas[p] {
		r := int32(id)
		if r != int32(s.d.Self) && s.rackOf(r) == rack && s.d.Alive(r) && slices.Contains(rt.InSync, r) {
			return r
		}
	}
	return service.NoReplica
}

// followerMayServe is nil when this node's replica of partition p of t,
// not the primary, may serve a follower read: it is in the in-sync set
// as every answer gives it (PartitionRoute: the primary's last report;
// none yet, as just after a new primary's election, counts every live
// replica in sync). A follower that fell out of the set stops serving at
// once (NOT_PRIMARY, hint: the primary). Serving while the report is
// missing is safe: a follower serves only what it knows to be committed,
// and never an offset above its own high watermark.
func (s *Service) followerMayServe(t *metadata.Topic, p int32) error {
	rt, ok := s.d.Routes.Get(routes.Key(t.ID, p))
	if ok && (rt.InSync == nil || slices.Contains(rt.InSync, int32(s.d.Self))) {
		return nil
	}
	e := service.Errorf(partition.ErrNotPrimary, "node %d is not in the in-sync set of %s/%d (in sync: %v); fetch from the primary",
		s.d.Self, t.Name, p, rt.InSync)
	if ok && rt.Leader > 0 {
		e.Hint = &service.Hint{NodeID: rt.Leader, ClientAddr: s.d.AddrOf(rt.Leader), Generation: rt.Term}
	}
	return e
}

// rackOf is node id's rack in the roster ("" when it has none).
func (s *Service) rackOf(id int32) string {
	for _, m := range s.d.Roster() {
		if int32(m.ID) == id {
			return m.Rack
		}
	}
	return ""
}

// ListOffsets implements service.Data.
func (s *Service) ListOffsets(from *shard.Shard, req *service.ListOffsetsRequest, done func(service.ListOffsetsResult, error)) {
	done = metered(s.d.Meter, apiListOffsets, done)
	gen, ts, committed := req.Generation, req.Timestamp, req.Isolation == service.IsolationReadCommitted
	onReplica(s, from, req.PartitionRef, nil, func(r *partition.Replica, t *metadata.Topic, reply func(service.ListOffsetsResult, error)) {
		o, err := r.ListOffsets(gen, ts)
		if committed && ts == partition.TimestampLatest {
			o.Offset = o.LastStableOffset
		}
		reply(service.ListOffsetsResult{Offset: o.Offset, Timestamp: o.Timestamp, Generation: generationAt(r.Log(), o.Offset),
			LogStartOffset: o.LogStartOffset, HighWatermark: o.HighWatermark, LastStableOffset: o.LastStableOffset}, err)
	}, done)
}

// generationAt is the generation of the batch holding (user) offset in
// l, or for the log's end (or any offset past the batches) of the last
// batch before it; the generation before the log's start when none is
// left; -1 for offset -1.
// REQUIRES: running on the log's shard.
func generationAt(l *segment.Log, offset int64) int32 {
	if offset < 0 {
		return -1
	}
	r := l.RaftOffset(offset)
	if offset >= l.UserEndOffset() {
		r = l.LogEndOffset() - 1
	}
	if r < l.LogStartOffset() {
		if g := l.EpochBeforeStart(); g > 0 {
			return g
		}
		return -1
	}
	g, err := l.TermAt(r)
	if err != nil {
		return -1
	}
	return g
}

// OffsetForGeneration implements service.Data: the log's leader-epoch
// cache answers, as a Kafka broker's does, except that the end of the
// current generation is the high watermark rather than the log's end,
// since no consumer read past it (partition.Replica.EndOfGeneration). It is metered as a ListOffsets (an
// offset lookup on the primary).
func (s *Service) OffsetForGeneration(from *shard.Shard, req *service.OffsetForGenerationRequest, done func(service.OffsetForGenerationResult, error)) {
	done = metered(s.d.Meter, apiListOffsets, done)
	gen, asked := req.Generation, req.Asked
	onReplica(s, from, req.PartitionRef, nil, func(r *partition.Replica, t *metadata.Topic, reply func(service.OffsetForGenerationResult, error)) {
		g, end, err := r.EndOfGeneration(gen, asked)
		reply(service.OffsetForGenerationResult{Generation: g, EndOffset: end}, err)
	}, done)
}

// DescribePartition implements service.Data.
func (s *Service) DescribePartition(from *shard.Shard, ref service.PartitionRef, done func(service.PartitionDetail, error)) {
	done = metered(s.d.Meter, apiDescribePartition, done)
	onReplica(s, from, ref, nil, func(r *partition.Replica, t *metadata.Topic, reply func(service.PartitionDetail, error)) {
		if err := r.CheckRoute(ref.Generation); err != nil {
			reply(service.PartitionDetail{}, err)
			return
		}
		reply(s.describeReplica(t, r), nil)
	}, done)
}

// describeReplica is the primary r (of topic t)'s log and followers.
// REQUIRES: running on r's shard.
func (s *Service) describeReplica(t *metadata.Topic, r *partition.Replica) service.PartitionDetail {
	l := r.Log()
	d := service.PartitionDetail{Route: s.PartitionRoute(t, r.Config().Partition), LogStartOffset: r.StartOffset(),
		HighWatermark: r.HighWatermark(), LogEndOffset: l.UserEndOffset(), SizeBytes: l.Size(), Segments: int32(l.SegmentCount()),
		LastStableOffset: r.LastStableOffset(), OpenTransactions: int32(r.OpenTransactions())}
	if r.Compacted() {
		d.Compacted, d.DirtyRatio = true, l.DirtyRatio()
	}
	for _, p := range r.Producers() {
		d.Producers = append(d.Producers, service.ProducerState{ProducerID: p.ProducerID, ProducerEpoch: p.Epoch,
			LastSequence: p.LastSequence, LastTimestampMs: p.LastTimestampMs, TxnStartOffset: p.TxnStart})
	}
	// In sync is the route's answer (PartitionRoute), the one every other
	// answer gives; when each follower last caught up is the primary's
	// sample behind it (Deps.CaughtUp).
	now := s.d.Now().UnixMilli()
	for _, pg := range r.Raft().Status().Progress {
		rp := service.ReplicaProgress{NodeID: int32(pg.ID), LogEndOffset: l.UserOffset(pg.Match + 1),
			InSync: slices.Contains(d.Route.InSync, int32(pg.ID)), LastCaughtUpMs: s.d.CaughtUp(r.Key(), pg.ID)}
		if pg.ID == s.d.Self {
			rp.LastCaughtUpMs = now
		}
		d.Replicas = append(d.Replicas, rp)
	}
	return d
}

// onReplica finds ref's partition, then runs fn with its local replica
// on the owning shard, and answers through done (on from; see runOn).
// Routing errors come back through done: the partition's absence here,
// no local replica (NOT_PRIMARY with a hint), a replica still opening or
// failed to open, a topic id of another history.
func onReplica[R any](s *Service, from *shard.Shard, ref service.PartitionRef, detach func(),
	fn func(r *partition.Replica, t *metadata.Topic, reply func(R, error)), done func(R, error)) {
	t, err := s.topicFor(ref.Topic, ref.Partition)
	if err != nil {
		var zero R
		done(zero, err)
		return
	}
	owner := s.d.Shards.Shard(s.d.ShardOf(t.ID, ref.Partition))
	RunOn(from, owner, detach, func(sh *shard.Shard, reply func(R, error)) {
		var zero R
		r, err := s.replicaFor(sh, t, ref.Partition)
		if err == nil {
			err = checkTopicID(ref.TopicID, t)
		}
		if err != nil {
			reply(zero, s.svcErr(err))
			return
		}
		fn(r, t, func(v R, err error) { reply(v, s.svcErr(err)) })
	}, done)
}

// topicFor is the topic of partition p of name in the View, or the
// error to answer: ErrUnknownTopicOrPartition, or ErrMetadataNotReady
// when the topic is unknown because the metadata is not loaded yet.
func (s *Service) topicFor(name string, p int32) (*metadata.Topic, error) {
	t := s.d.View().Topics[name]
	if t != nil && p >= 0 && int(p) < t.Partitions() {
		return t, nil
	}
	if t == nil {
		if err := s.d.Ready(); err != nil {
			return nil, s.svcErr(err)
		}
	}
	return nil, unknownPartition(name, p, t)
}

// unknownPartition says which of name and p does not exist.
func unknownPartition(name string, p int32, t *metadata.Topic) error {
	if t == nil {
		return service.Errorf(service.ErrUnknownTopicOrPartition, "topic %q does not exist", name)
	}
	return service.Errorf(service.ErrUnknownTopicOrPartition, "topic %q has partitions 0..%d, not %d", name, t.Partitions()-1, p)
}

// replicaFor finds the local replica of partition p of t on shard sh, or
// the routing error a client should see.
func (s *Service) replicaFor(sh *shard.Shard, t *metadata.Topic, p int32) (*partition.Replica, error) {
	key := routes.Key(t.ID, p)
	if r := s.d.Hosts[sh.ID()].Get(key); r != nil {
		return r, nil
	}
	if !holds(t.Replicas[p], s.d.Self) {
		e := service.Errorf(partition.ErrNotPrimary, "node %d holds no replica of %s/%d", s.d.Self, t.Name, p)
		if rt, ok := s.d.Routes.Get(key); ok && rt.Leader > 0 {
			e.Hint = &service.Hint{NodeID: rt.Leader, ClientAddr: s.d.AddrOf(rt.Leader), Generation: rt.Term}
		}
		return nil, e
	}
	if err := s.d.OpenFailed(key, t.Name, p); err != nil {
		return nil, err
	}
	e := service.Errorf(partition.ErrPrimaryNotAvailable, "%s/%d is still opening on node %d", t.Name, p, s.d.Self)
	e.RetryAfterMs = 10
	return nil, e
}

// checkTopicID applies routing check 1's id half: a request routed with
// another history of the name is refused.
func checkTopicID(id metadata.TopicID, t *metadata.Topic) error {
	if id != (metadata.TopicID{}) && id != t.ID {
		return service.Errorf(service.ErrUnknownTopicOrPartition, "topic %q now has id %s, not %s: the topic was deleted and created again",
			t.Name, t.ID, id)
	}
	return nil
}
