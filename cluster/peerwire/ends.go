package peerwire

import "encoding/binary"

// Ends asks a peer for the high watermarks of partitions it leads, so a
// node can read a partition's end from its primary, the one source every
// figure of it comes from (a consumer group's lag on /metrics, the HTTP
// API's and the CLI's). The peer answers EndsAnswer with the same ID and
// one end per partition asked, in order.
//
//	Ends:       kind(1)=11 id(8)  count(4)  count × [topic id(16) partition(4)]
//	EndsAnswer: kind(1)=12 id(8)  count(4)  count × [high watermark(8), -1: not led there]
type Ends struct {
	// ID pairs the answer with its question (the asker's own counter).
	ID    uint64
	Parts []EndKey
}

// EndKey is one partition asked.
type EndKey struct {
	TopicID   [16]byte
	Partition int32
}

// EndsAnswer answers an Ends: HW[i] is partition Parts[i]'s high
// watermark on the answering node, -1 when it does not lead it (or does
// not know the topic).
type EndsAnswer struct {
	ID uint64
	HW []int64
}

// EndsPerFrameMax bounds the partitions of one Ends frame (and so of
// its answer): an asker splits a longer question.
const EndsPerFrameMax = 4096

// endKeyBytes is one EndKey on the wire.
const endKeyBytes = 16 + 4

// AppendEnds appends an Ends frame body.
// REQUIRES: len(q.Parts) <= EndsPerFrameMax.
func AppendEnds(dst []byte, q Ends) []byte {
	dst = append(dst, KindEnds)
	dst = binary.BigEndian.AppendUint64(dst, q.ID)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(q.Parts)))
	for _, k := range q.Parts {
		dst = append(dst, k.TopicID[:]...)
		dst = binary.BigEndian.AppendUint32(dst, uint32(k.Partition))
	}
	return dst
}

// DecodeEnds decodes an Ends frame body.
func DecodeEnds(b []byte) (Ends, error) {
	r := &reader{b: b}
	var q Ends
	if k := r.u8(); k != KindEnds {
		r.fail("kind %d is not Ends", k)
		return q, r.err
	}
	q.ID = r.u64()
	n := int(r.u32())
	if r.err == nil && (n > EndsPerFrameMax || n*endKeyBytes != len(r.b)) {
		r.fail("ends of %d partitions in %d bytes (at most %d partitions)", n, len(r.b), EndsPerFrameMax)
	}
	if r.err != nil {
		return Ends{}, r.err
	}
	q.Parts = make([]EndKey, n)
	for i := range q.Parts {
		copy(q.Parts[i].TopicID[:], r.take(16))
		q.Parts[i].Partition = int32(r.u32())
	}
	return q, r.err
}

// AppendEndsAnswer appends an EndsAnswer frame body.
// REQUIRES: len(a.HW) <= EndsPerFrameMax.
func AppendEndsAnswer(dst []byte, a EndsAnswer) []byte {
	dst = append(dst, KindEndsAnswer)
	dst = binary.BigEndian.AppendUint64(dst, a.ID)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(a.HW)))
	for _, hw := range a.HW {
		dst = binary.BigEndian.AppendUint64(dst, uint64(hw))
	}
	return dst
}

// DecodeEndsAnswer decodes an EndsAnswer frame body.
func DecodeEndsAnswer(b []byte) (EndsAnswer, error) {
	r := &reader{b: b}
	var a EndsAnswer
	if k := r.u8(); k != KindEndsAnswer {
		r.fail("kind %d is not EndsAnswer", k)
		return a, r.err
	}
	a.ID = r.u64()
	n := int(r.u32())
	if r.err == nil && (n > EndsPerFrameMax || n*8 != len(r.b)) {
		r.fail("an ends answer of %d partitions in %d bytes (at most %d partitions)", n, len(r.b), EndsPerFrameMax)
	}
	if r.err != nil {
		return EndsAnswer{}, r.err
	}
	a.HW = make([]int64, n)
	for i := range a.HW {
		a.HW[i] = int64(r.u64())
		if a.HW[i] < -1 {
			r.fail("partition %d's end is %d", i, a.HW[i])
			return EndsAnswer{}, r.err
		}
	}
	return a, r.err
}
