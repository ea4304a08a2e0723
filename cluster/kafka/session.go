package kafka

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Incremental fetch sessions (KIP-227, Fetch v7+). A consumer of many
// partitions sends, after the first request of a session, only the
// partitions whose fetch position changed, and is answered only the
// partitions that have something new: records, an error, or a changed
// high watermark or log start. The session lives on the connection (one
// per connection, the most a client keeps with one broker); a client
// that reconnects is told FETCH_SESSION_ID_NOT_FOUND and starts a new
// one, as after a Kafka broker's restart.

// sessionPartitionsMax bounds the partitions one session tracks (a
// client with more is sent full fetches: the session is refused by
// answering session id 0).
const sessionPartitionsMax = 10000

// fetchSession is a connection's session.
type fetchSession struct {
	id int32
	// epoch is the epoch the next incremental request must carry.
	epoch int32
	// parts are the tracked partitions, in the order first asked for.
	parts []sessionPart
	index map[topicPartition]int
	// ids are the topics' ids by name, for the answers of Fetch v13 and
	// later, which name topics by id.
	ids map[string][16]byte
}

// noteIDs records the ids of req's topics.
func (s *fetchSession) noteIDs(req *kmsg.FetchRequest) {
	if req.Version < 13 {
		return
	}
	if s.ids == nil {
		s.ids = map[string][16]byte{}
	}
	for _, t := range req.Topics {
		s.ids[t.Topic] = t.TopicID
	}
}

type topicPartition struct {
	topic     string
	partition int32
}

// sessionPart is one tracked partition: the client's last fetch position
// and what it was last told.
type sessionPart struct {
	topicPartition
	fetchOffset, logStartOffset int64
	maxBytes, leaderEpoch       int32
	// told says the client was answered for it; hw and logStart are what
	// it was told.
	told         bool
	hw, logStart int64
}

// update applies one request partition to the session.
func (s *fetchSession) update(topic string, p *kmsg.FetchRequestTopicPartition) {
	key := topicPartition{topic, p.Partition}
	i, ok := s.index[key]
	if !ok {
		i = len(s.parts)
		s.parts = append(s.parts, sessionPart{topicPartition: key})
		s.index[key] = i
	}
	sp := &s.parts[i]
	sp.fetchOffset, sp.logStartOffset, sp.maxBytes, sp.leaderEpoch = p.FetchOffset, p.LogStartOffset, p.PartitionMaxBytes, p.CurrentLeaderEpoch
}

// forget drops partitions from the session.
func (s *fetchSession) forget(topic string, partitions []int32) {
	drop := map[topicPartition]bool{}
	for _, p := range partitions {
		drop[topicPartition{topic, p}] = true
	}
	kept := s.parts[:0]
	for _, sp := range s.parts {
		if !drop[sp.topicPartition] {
			kept = append(kept, sp)
		}
	}
	s.parts = kept
	s.index = make(map[topicPartition]int, len(kept))
	for i, sp := range kept {
		s.index[sp.topicPartition] = i
	}
}

// request is the full fetch the session stands for now.
func (s *fetchSession) request(from *kmsg.FetchRequest) *kmsg.FetchRequest {
	full := *from
	full.Topics = nil
	byTopic := map[string]int{}
	for _, sp := range s.parts {
		ti, ok := byTopic[sp.topic]
		if !ok {
			ti = len(full.Topics)
			byTopic[sp.topic] = ti
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = sp.topic, s.ids[sp.topic]
			full.Topics = append(full.Topics, rt)
		}
		p := kmsg.NewFetchRequestTopicPartition()
		p.Partition, p.FetchOffset, p.LogStartOffset, p.PartitionMaxBytes, p.CurrentLeaderEpoch =
			sp.partition, sp.fetchOffset, sp.logStartOffset, sp.maxBytes, sp.leaderEpoch
		full.Topics[ti].Partitions = append(full.Topics[ti].Partitions, p)
	}
	return &full
}

// openSession reads req's session fields against the connection's
// session. It returns the full request to serve, the session the answer
// belongs to (nil: none, session id 0), whether the answer is
// incremental, or a top-level error code for a request that names a
// session it cannot have.
//
// The rules are KIP-227's, as a Kafka broker applies them: epoch 0 or -1
// is a full fetch, which closes the session it names (known or not) and,
// at epoch 0, opens a new one; any other epoch is incremental, answered
// FETCH_SESSION_ID_NOT_FOUND when the id is not this connection's
// session (id 0 included) and INVALID_FETCH_SESSION_EPOCH when the epoch
// is not the next one. A client told either resets to a full fetch at
// epoch 0 keeping its old id (franz-go does), so refusing that full
// fetch would leave it asking in a loop.
func (l *Listener) openSession(st *conn, req *kmsg.FetchRequest) (full *kmsg.FetchRequest, s *fetchSession, incremental bool, code int16) {
	if req.Version < 7 {
		return req, nil, false, 0
	}
	if req.SessionEpoch == 0 || req.SessionEpoch == -1 {
		if st.session != nil && st.session.id == req.SessionID {
			st.session = nil // closed by the full fetch that names it
		}
		if req.SessionEpoch == -1 {
			return req, nil, false, 0 // a full fetch without a session
		}
		s = &fetchSession{id: l.newSessionID(), epoch: 1, index: map[topicPartition]int{}}
		for ti := range req.Topics {
			for pi := range req.Topics[ti].Partitions {
				s.update(req.Topics[ti].Topic, &req.Topics[ti].Partitions[pi])
			}
		}
		if len(s.parts) > sessionPartitionsMax {
			return req, nil, false, 0
		}
		s.noteIDs(req)
		st.session = s
		return req, s, false, 0
	}
	s = st.session
	if req.SessionID == 0 || s == nil || s.id != req.SessionID {
		return nil, nil, false, kerr.FetchSessionIDNotFound.Code
	}
	if req.SessionEpoch != s.epoch {
		return nil, nil, false, kerr.InvalidFetchSessionEpoch.Code
	}
	for _, ft := range req.ForgottenTopics {
		s.forget(ft.Topic, ft.Partitions)
	}
	for ti := range req.Topics {
		for pi := range req.Topics[ti].Partitions {
			s.update(req.Topics[ti].Topic, &req.Topics[ti].Partitions[pi])
		}
	}
	if len(s.parts) > sessionPartitionsMax {
		st.session = nil
		return nil, nil, false, kerr.FetchSessionIDNotFound.Code
	}
	s.noteIDs(req)
	s.epoch = nextEpoch(s.epoch)
	return s.request(req), s, true, 0
}

// nextEpoch follows epoch, wrapping to 1 (0 and -1 are reserved).
func nextEpoch(epoch int32) int32 {
	if epoch == math.MaxInt32 {
		return 1
	}
	return epoch + 1
}

// newSessionID is a session id no session of this listener has now
// (ids count up from 1; 0 means none).
func (l *Listener) newSessionID() int32 {
	for {
		id := int32(l.sessionIDs.Add(1) & math.MaxInt32)
		if id != 0 {
			return id
		}
	}
}

// sessionAnswer makes resp the session's answer: it carries the session
// id, and, when incremental, only the partitions with something new
// (records, an error, a moved high watermark or log start). The session
// remembers what each partition was told.
func sessionAnswer(s *fetchSession, resp *kmsg.FetchResponse, incremental bool) {
	if s == nil {
		return
	}
	resp.SessionID = s.id
	topics := resp.Topics[:0]
	for _, rt := range resp.Topics {
		parts := rt.Partitions[:0]
		for _, rp := range rt.Partitions {
			i, ok := s.index[topicPartition{rt.Topic, rp.Partition}]
			if !ok {
				continue
			}
			sp := &s.parts[i]
			// A preferred read replica is news too: without records
			// or a moved watermark, it would otherwise never reach a
			// consumer in a session.
			changed := !sp.told || len(rp.RecordBatches) > 0 || rp.ErrorCode != 0 ||
				rp.HighWatermark != sp.hw || rp.LogStartOffset != sp.logStart || rp.PreferredReadReplica >= 0
			if rp.ErrorCode == 0 {
				sp.told, sp.hw, sp.logStart = true, rp.HighWatermark, rp.LogStartOffset
			}
			if changed || !incremental {
				parts = append(parts, rp)
			}
		}
		if len(parts) > 0 {
			rt.Partitions = parts
			topics = append(topics, rt)
		}
	}
	resp.Topics = topics
}
