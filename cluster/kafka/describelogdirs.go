package kafka

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio"
)

// describeLogDirsKey is DescribeLogDirs (KIP-113), versions 0-4 as Kafka
// 3.9 serves them (5 adds KIP-1066's cordoned directories).
const describeLogDirsKey int16 = 35

// describeLogDirs answers with this node's one log directory, its data
// directory, and the replicas it hosts there, as a Kafka broker answers
// for its own directories (a client asks every broker: kadm's
// DescribeAllLogDirs). Each partition's size is its log's, in bytes; the
// offset lag is 0: Kafka's is the high watermark minus the log's end when
// positive, which for a partition's current log (not a future one being
// moved between directories, which we never have) is 0 on a Kafka broker
// too. A follower's distance behind its primary is the primary's to tell
// (DescribePartition, the HTTP partition view). Topics null asks for
// every replica; a topic or partition asked for that this node does not
// host is left out, as in Kafka.
func (l *Listener) describeLogDirs(c *netio.Conn, req *kmsg.DescribeLogDirsRequest, reply func(kmsg.Response)) {
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	var want map[string]map[int32]bool
	if req.Topics != nil {
		want = make(map[string]map[int32]bool, len(req.Topics))
		for _, t := range req.Topics {
			ps := want[t.Topic]
			if ps == nil {
				ps = make(map[int32]bool, len(t.Partitions))
				want[t.Topic] = ps
			}
			for _, p := range t.Partitions {
				ps[p] = true
			}
		}
	}
	l.svc.LogDirs(c.Shard(), func(res service.LogDirsResult, err error) {
		dir := kmsg.NewDescribeLogDirsResponseDir()
		if err != nil {
			// v3+ has a top-level code; before it the directory carries it.
			resp.ErrorCode = errorCode(err)
			dir.ErrorCode = resp.ErrorCode
			resp.Dirs = append(resp.Dirs, dir)
			reply(resp)
			return
		}
		dir.Dir, dir.TotalBytes, dir.UsableBytes = res.Dir, res.TotalBytes, res.UsableBytes
		for _, r := range res.Replicas { // sorted by topic, then partition
			if want != nil && !want[r.Topic][r.Partition] {
				continue
			}
			if n := len(dir.Topics); n == 0 || dir.Topics[n-1].Topic != r.Topic {
				t := kmsg.NewDescribeLogDirsResponseDirTopic()
				t.Topic = r.Topic
				dir.Topics = append(dir.Topics, t)
			}
			p := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			p.Partition, p.Size, p.OffsetLag = r.Partition, r.SizeBytes, 0
			t := &dir.Topics[len(dir.Topics)-1]
			t.Partitions = append(t.Partitions, p)
		}
		resp.Dirs = append(resp.Dirs, dir)
		reply(resp)
	})
}
