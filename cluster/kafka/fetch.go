package kafka

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/cluster/frontend"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/segment/batch"
)

// Fetch bounds.
const (
	// fetchWaitMax bounds a fetch's max_wait_ms (Kafka clients send 500 ms
	// to 5 s).
	fetchWaitMax = 30 * time.Second
	// fetchPartitionBytesMax bounds one partition's share of an answer.
	fetchPartitionBytesMax = 16 << 20
)

// fetch reads every partition asked for. A first pass reads without
// waiting; when it finds fewer than min_bytes and the client allows a
// wait, a second pass parks a read on every partition and answers with
// the first that has data (or when all of them time out). Reads parked
// by the second pass that answer after that are dropped.
//
// Incremental fetch sessions (KIP-227) are session.go's.
// isolation_level read_committed reads to each partition's last stable
// offset and answers the aborted transactions of the range read
// (docs/design/transactions.md). rack_id (v11+, KIP-392) is the service's
// Rack: the primary answers a partition with a preferred_read_replica in
// the consumer's rack instead of records, and a follower serves the
// fetch; such an answer is sent at once, without waiting for min_bytes,
// so that the consumer moves to its replica without a wasted poll.
func (l *Listener) fetch(c *netio.Conn, h RequestHeader, req *kmsg.FetchRequest, send func(answer)) {
	l.resolveTopicIDs(req)
	full, s, incremental, code := l.openSession(c.Context().(*conn), req)
	if code != 0 {
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		resp.ErrorCode = code
		send(answer{frame: encodeResponse(h, resp)})
		return
	}
	files := &fetchFiles{}
	calls := &fetchCalls{owner: frontend.NoOwner, open: 2} // the answer, and the Track below
	reply := func(resp *kmsg.FetchResponse) {
		sessionAnswer(s, resp, incremental)
		send(files.answer(h, resp))
		calls.end()
	}
	wait := min(time.Duration(max(req.MaxWaitMillis, 0))*time.Millisecond, fetchWaitMax)
	l.fetchPass(c, full, 0, files, calls, func(resp *kmsg.FetchResponse, bytes int, failed bool) {
		if wait == 0 || failed || bytes >= int(max(req.MinBytes, 1)) || redirects(resp) {
			reply(resp)
			return
		}
		l.fetchPass(c, full, wait, files, calls, func(resp *kmsg.FetchResponse, _ int, _ bool) { reply(resp) })
	})
	calls.done = l.cfg.Mover.Track(c, &c.Context().(*conn).homing, calls.owner)
	calls.end()
}

// fetchCalls joins a fetch's answer with its service calls for the
// connection's Mover: the connection may move once the answer is sent
// and every read it started has completed, the parked reads that answer
// after the answer left included (they complete on this shard).
type fetchCalls struct {
	// owner is the owner of the partitions read (frontend.Fold).
	owner int
	// open counts the answer, the Track step and the reads outstanding;
	// done runs when it reaches 0. Invariant: open >= 0.
	open int
	done func()
}

func (f *fetchCalls) start() { f.open++ }

func (f *fetchCalls) end() {
	f.open--
	if f.open == 0 {
		f.done()
	}
}

// fetchPass reads every partition of req, parking each for up to wait.
// With wait 0 done runs once all have answered; else it runs at the
// first answer with data, an error or a preferred read replica, or when
// all have answered, and the response holds the partitions that answered
// by then. bytes is the record bytes in resp; failed says a partition
// answered an error. Records are kept in files (the answer's placeholders).
// Every read is counted in calls, and its owner folded into calls.owner.
func (l *Listener) fetchPass(c *netio.Conn, req *kmsg.FetchRequest, wait time.Duration, files *fetchFiles, calls *fetchCalls,
	done func(resp *kmsg.FetchResponse, bytes int, failed bool)) {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.SessionID = 0
	pending, bytes, failed, answered, looped, redirected := 1, 0, false, false, false, false
	var have []*kmsg.FetchResponseTopicPartition // partitions that answered
	leaders := map[int32]bool{}                  // nodes named in CurrentLeader hints
	finish := func() {
		pending--
		if answered || pending > 0 && !(looped && wait > 0 && (bytes > 0 || failed || redirected)) {
			return
		}
		answered = true
		if pending > 0 {
			keepAnswered(resp, have)
		}
		if req.Version >= 3 && req.MaxBytes > 0 {
			bytes = trimToMaxBytes(resp, int(req.MaxBytes), files.size)
		}
		l.addFetchLeaderEndpoints(resp, leaders)
		done(resp, bytes, failed)
	}
	resp.Topics = make([]kmsg.FetchResponseTopic, len(req.Topics))
	for ti := range req.Topics {
		t := &req.Topics[ti]
		rt := &resp.Topics[ti]
		*rt = kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		rt.Partitions = make([]kmsg.FetchResponseTopicPartition, len(t.Partitions))
		for pi := range t.Partitions {
			p := &t.Partitions[pi]
			rp := &rt.Partitions[pi]
			*rp = kmsg.NewFetchResponseTopicPartition()
			rp.Partition = p.Partition
			if code := refuseConsumerOffsets(t.Topic); code != 0 {
				rp.ErrorCode = code
				have = append(have, rp)
				failed = true
				continue
			}
			if p.FetchOffset < 0 {
				rp.ErrorCode = kerr.OffsetOutOfRange.Code
				have = append(have, rp)
				failed = true
				continue
			}
			maxBytes := p.PartitionMaxBytes
			if req.Version >= 3 && req.MaxBytes > 0 {
				maxBytes = min(maxBytes, req.MaxBytes)
			}
			maxBytes = min(max(maxBytes, 1), fetchPartitionBytesMax)
			fr := &service.FetchRequest{PartitionRef: service.PartitionRef{Topic: t.Topic, Partition: p.Partition,
				Generation: p.CurrentLeaderEpoch}, Offset: p.FetchOffset, MaxBytes: uint32(maxBytes),
				Isolation: service.Isolation(req.IsolationLevel)}
			if req.Version < 9 {
				fr.Generation = service.GenerationUnknown
			}
			if req.Version >= 13 {
				fr.TopicID = metadata.TopicID(t.TopicID) // fences a recreated name
			}
			if req.Version >= 11 {
				fr.Rack = req.Rack
			}
			if wait > 0 {
				fr.MinBytes, fr.MaxWait = 1, wait
			}
			pending++
			calls.owner = frontend.Fold(calls.owner, l.cfg.Mover.Route(c, t.Topic, p.Partition))
			calls.start()
			l.fetchRecords(c, fr, 0, func(records partRecords, res service.FetchResult, err error) {
				defer calls.end()
				if answered || files.released {
					records.release()
					return // a parked read after the answer left: dropped
				}
				if err != nil {
					rp.ErrorCode = errorCode(err)
					if req.Version >= 13 && rp.ErrorCode == kerr.UnknownTopicOrPartition.Code && !l.knownTopicID(t.Topic, t.TopicID) {
						rp.ErrorCode = kerr.UnknownTopicID.Code // the client named the topic by id
					}
					if id, epoch, ok := leaderHint(err); ok && req.Version >= 16 {
						rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = id, epoch
						leaders[id] = true
					}
					failed = true
				} else {
					rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = res.HighWatermark, res.LastStableOffset, res.LogStartOffset
					if req.IsolationLevel == 1 && req.Version >= 4 {
						rp.AbortedTransactions = abortedTransactions(res.Aborted)
					}
					rp.RecordBatches = files.records(records)
					rp.PreferredReadReplica = res.PreferredReadReplica
					redirected = redirected || res.PreferredReadReplica >= 0
					bytes += records.bytes
				}
				have = append(have, rp)
				finish()
			})
		}
	}
	looped = true
	finish()
}

// addFetchLeaderEndpoints lists in resp the Kafka addresses of the
// leaders its partitions' CurrentLeader hints name (KIP-951: Fetch v16
// and later carry them), so that a consumer moves without first
// refreshing its metadata.
func (l *Listener) addFetchLeaderEndpoints(resp *kmsg.FetchResponse, leaders map[int32]bool) {
	if len(leaders) == 0 || resp.Version < 16 {
		return
	}
	for _, b := range l.brokers() {
		if leaders[b.id] {
			rb := kmsg.NewFetchResponseBroker()
			rb.NodeID, rb.Host, rb.Port, rb.Rack = b.id, b.host, b.port, b.rack
			resp.Brokers = append(resp.Brokers, rb)
		}
	}
}

// abortedTransactions is a read_committed answer's aborted list, as
// Kafka sends it: an empty list, not null, when there is none.
func abortedTransactions(a []service.AbortedTxn) []kmsg.FetchResponseTopicPartitionAbortedTransaction {
	out := make([]kmsg.FetchResponseTopicPartitionAbortedTransaction, len(a))
	for i, t := range a {
		out[i] = kmsg.NewFetchResponseTopicPartitionAbortedTransaction()
		out[i].ProducerID, out[i].FirstOffset = t.ProducerID, t.FirstOffset
	}
	return out
}

// redirects says a partition of resp names a preferred read replica.
func redirects(resp *kmsg.FetchResponse) bool {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.PreferredReadReplica >= 0 {
				return true
			}
		}
	}
	return false
}

// trimToMaxBytes keeps resp's records within the request's max_bytes, as
// Kafka does: partitions are filled in order, the first with records is
// answered whole even when it alone is larger, and a partition whose
// records would pass the bound is answered without them (the client
// asks again). Each partition read up to its own bound in parallel, so
// without this an answer could hold the partition bound times the
// partitions. size is the length of a partition's records (its
// RecordBatches may be a placeholder for file ranges). It returns the
// record bytes kept.
func trimToMaxBytes(resp *kmsg.FetchResponse, maxBytes int, size func([]byte) int) int {
	total := 0
	for ti := range resp.Topics {
		parts := resp.Topics[ti].Partitions
		for pi := range parts {
			n := size(parts[pi].RecordBatches)
			if total > 0 && total+n > maxBytes {
				parts[pi].RecordBatches = []byte{} // empty, not null (records)
				continue
			}
			total += n
		}
	}
	return total
}

// keepAnswered drops from resp the partitions not in have.
func keepAnswered(resp *kmsg.FetchResponse, have []*kmsg.FetchResponseTopicPartition) {
	in := map[*kmsg.FetchResponseTopicPartition]bool{}
	for _, p := range have {
		in[p] = true
	}
	topics := resp.Topics[:0]
	for _, t := range resp.Topics {
		var parts []kmsg.FetchResponseTopicPartition
		for i := range t.Partitions {
			if in[&t.Partitions[i]] {
				parts = append(parts, t.Partitions[i])
			}
		}
		if len(parts) > 0 {
			t.Partitions = parts
			topics = append(topics, t)
		}
	}
	resp.Topics = topics
}

// controlSkipsMax bounds the reads one partition's fetch makes past
// answers that hold only control batches (a new primary's no-op, one
// per generation); past it the control batches are answered as they are.
const controlSkipsMax = 64

// fetchRecords reads one partition for a fetch and answers its records
// without the log's consensus batches: the no-op a new primary appends is
// a control batch, which current clients skip but older ones
// (kafka-python 2.0) hand to the application as a record. Transaction
// markers (transactional control batches) are Kafka's own and are kept,
// as Kafka sends them: read_committed clients end transactions on them.
// The records stay in the segment files (sent with sendfile, fetchfiles.go) unless
// the file system has no descriptors. When a read finds only control
// batches, it reads again from the offset after them, so a consumer is
// never answered nothing while data follows them. done runs on the
// connection's shard and owns the records (release them).
func (l *Listener) fetchRecords(c *netio.Conn, fr *service.FetchRequest, skips int, done func(partRecords, service.FetchResult, error)) {
	l.svc.Fetch(c.Shard(), fr, func(res service.FetchResult, err error) {
		if err != nil {
			done(partRecords{}, res, err)
			return
		}
		if skips >= controlSkipsMax {
			// Past the bound: the control batches are answered as they are.
			kept, _, _, err := keepData(res.Records, false)
			res.Records = service.Records{}
			done(kept, res, err)
			return
		}
		kept, next, dropped, err := keepData(res.Records, true)
		if err != nil {
			done(partRecords{}, res, err)
			return
		}
		if kept.bytes == 0 && dropped {
			kept.release()
			again := *fr
			again.Offset = next
			l.fetchRecords(c, &again, skips+1, done)
			return
		}
		res.Records = service.Records{} // kept holds them
		done(kept, res, nil)
	})
}

// stripControl returns b's record batches without its consensus batches
// (control batches that are not transaction markers)
// (compacted in place), the offset after the last batch, and whether it
// dropped any. A batch it cannot read ends the scan: it and what follows
// are kept, for the client to judge.
func stripControl(b []byte) (kept []byte, next int64, dropped bool) {
	kept = b[:0]
	for len(b) > 0 {
		h, err := batch.ReadHeader(b)
		if err != nil || h.Size() > len(b) {
			return append(kept, b...), next, dropped
		}
		size := h.Size()
		if h.IsControl() && !h.IsTxnMarker() {
			dropped = true
		} else {
			kept = append(kept, b[:size]...)
		}
		next = h.LastOffset() + 1
		b = b[size:]
	}
	return kept, next, dropped
}
