package partition

import "github.com/corestream/corestream/segment/batch"

// noopBatch is the one-record control batch a new primary appends so that
// entries of earlier terms can commit (raftlite's EntryLeaderNoop). Its
// record carries Kafka's control-record key (version 0, type -1: none of
// Kafka's transaction markers); consumers skip control batches. With
// dense offsets it is zero-width: it takes no user offset
// (docs/design/offsets.md).
func noopBatch(nowMs int64, dense bool) []byte {
	return batch.BuildConsensus(batch.ConsensusKeyNoop, nil, nowMs, dense)
}
