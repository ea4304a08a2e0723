package client

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"

	"github.com/corestream/corestream/netio/wire"
)

// The group consumer's member metadata and assignments are written in
// Kafka's consumer protocol layout (protocol type "consumer"), so that
// native and Kafka members can share a group and Kafka tools can read
// what a native group's members own:
//
//	subscription (ConsumerProtocolSubscription v0):
//	  version    int16    0
//	  topics     int32 count, then int16-length strings
//	  user_data  int32 length (-1: none), then bytes
//	assignment (ConsumerProtocolAssignment v0):
//	  version    int16    0
//	  topics     int32 count, then { topic int16-length string,
//	                                 partitions int32 count, then int32s }
//	  user_data  int32 length (-1: none), then bytes
//
// Later versions add fields after these; a decoder reads the topics and
// ignores the rest.

// groupProtocolType is the protocol type of consumer groups.
const groupProtocolType = "consumer"

// Assignors a group consumer offers, by name (Kafka's names).
const (
	// AssignorRange gives each member a contiguous range of each topic's
	// partitions (Kafka's RangeAssignor, the default).
	AssignorRange = "range"
	// AssignorRoundRobin deals every subscribed partition to the members
	// in turn (Kafka's RoundRobinAssignor).
	AssignorRoundRobin = "roundrobin"
)

// errBadGroupBytes: a member's metadata or assignment does not parse.
var errBadGroupBytes = errors.New("client: malformed consumer group metadata")

func appendSubscription(dst []byte, topics []string) []byte {
	dst = binary.BigEndian.AppendUint16(dst, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(topics)))
	for _, t := range topics {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(t)))
		dst = append(dst, t...)
	}
	return binary.BigEndian.AppendUint32(dst, 0xFFFFFFFF)
}

// groupReader reads the big-endian fields of the layout above; the
// first failure sticks.
type groupReader struct {
	b   []byte
	err error
}

func (r *groupReader) take(n int) []byte {
	if r.err != nil || n < 0 || len(r.b) < n {
		r.err = errBadGroupBytes
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *groupReader) i16() int16 {
	if p := r.take(2); p != nil {
		return int16(binary.BigEndian.Uint16(p))
	}
	return 0
}

func (r *groupReader) i32() int32 {
	if p := r.take(4); p != nil {
		return int32(binary.BigEndian.Uint32(p))
	}
	return 0
}

func (r *groupReader) str() string { return string(r.take(int(r.i16()))) }

// count reads an array count no larger than the bytes left allow.
func (r *groupReader) count(elemMin int) int {
	n := int(r.i32())
	if r.err == nil && (n < 0 || n*elemMin > len(r.b)) {
		r.err = errBadGroupBytes
	}
	if r.err != nil {
		return 0
	}
	return n
}

// decodeSubscription is a member's subscribed topics.
func decodeSubscription(b []byte) ([]string, error) {
	r := groupReader{b: b}
	r.i16()
	n := r.count(2)
	topics := make([]string, 0, n)
	for i := 0; i < n && r.err == nil; i++ {
		topics = append(topics, r.str())
	}
	return topics, r.err
}

func appendAssignment(dst []byte, parts []wire.TopicPartition) []byte {
	byTopic := map[string][]int32{}
	var topics []string
	for _, p := range parts {
		if _, ok := byTopic[p.Topic]; !ok {
			topics = append(topics, p.Topic)
		}
		byTopic[p.Topic] = append(byTopic[p.Topic], p.Partition)
	}
	sort.Strings(topics)
	dst = binary.BigEndian.AppendUint16(dst, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(topics)))
	for _, t := range topics {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(t)))
		dst = append(dst, t...)
		ps := byTopic[t]
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(ps)))
		for _, p := range ps {
			dst = binary.BigEndian.AppendUint32(dst, uint32(p))
		}
	}
	return binary.BigEndian.AppendUint32(dst, 0xFFFFFFFF)
}

// decodeAssignment is a member's partitions, sorted; an empty
// assignment (no bytes) owns nothing.
func decodeAssignment(b []byte) ([]wire.TopicPartition, error) {
	if len(b) == 0 {
		return nil, nil
	}
	r := groupReader{b: b}
	r.i16()
	n := r.count(2 + 4)
	var out []wire.TopicPartition
	for i := 0; i < n && r.err == nil; i++ {
		t := r.str()
		m := r.count(4)
		for j := 0; j < m && r.err == nil; j++ {
			out = append(out, wire.TopicPartition{Topic: t, Partition: r.i32()})
		}
	}
	sortPartitions(out)
	return out, r.err
}

func sortPartitions(ps []wire.TopicPartition) {
	sort.Slice(ps, func(i, j int) bool {
		if ps[i].Topic != ps[j].Topic {
			return ps[i].Topic < ps[j].Topic
		}
		return ps[i].Partition < ps[j].Partition
	})
}

// assign computes every member's partitions with the named assignor:
// subs maps member id to its subscribed topics, partitions each topic to
// its partition count (a topic missing there is not assigned). Every
// member gets an entry, empty when it owns nothing. Pure: the leader
// runs it, the tests table it.
func assign(assignor string, subs map[string][]string, partitions map[string]int32) (map[string][]wire.TopicPartition, error) {
	members := make([]string, 0, len(subs))
	for m := range subs {
		members = append(members, m)
	}
	sort.Strings(members)
	out := make(map[string][]wire.TopicPartition, len(members))
	for _, m := range members {
		out[m] = nil
	}
	subscribed := func(m, topic string) bool {
		for _, t := range subs[m] {
			if t == topic {
				return true
			}
		}
		return false
	}
	topics := make([]string, 0, len(partitions))
	for t := range partitions {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	switch assignor {
	case AssignorRange:
		for _, t := range topics {
			var ms []string
			for _, m := range members {
				if subscribed(m, t) {
					ms = append(ms, m)
				}
			}
			if len(ms) == 0 {
				continue
			}
			n := int(partitions[t])
			per, extra := n/len(ms), n%len(ms)
			next := 0
			for i, m := range ms {
				k := per
				if i < extra {
					k++
				}
				for p := next; p < next+k; p++ {
					out[m] = append(out[m], wire.TopicPartition{Topic: t, Partition: int32(p)})
				}
				next += k
			}
		}
	case AssignorRoundRobin:
		i := 0
		for _, t := range topics {
			for p := int32(0); p < partitions[t]; p++ {
				for tries := 0; tries < len(members); tries++ {
					m := members[i%len(members)]
					i++
					if subscribed(m, t) {
						out[m] = append(out[m], wire.TopicPartition{Topic: t, Partition: p})
						break
					}
				}
			}
		}
	default:
		return nil, fmt.Errorf("client: unknown assignor %q (want %q or %q)", assignor, AssignorRange, AssignorRoundRobin)
	}
	return out, nil
}
