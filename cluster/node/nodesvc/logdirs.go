package nodesvc

import (
	"cmp"
	"path/filepath"
	"slices"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/shard"
	"github.com/corestream/corestream/shard/partition"
)

// LogDirs implements service.Data: every shard lists the replicas it
// hosts, on itself (a replica's log is read only on its shard), and the
// answer is their union once the last shard answered.
func (s *Service) LogDirs(from *shard.Shard, done func(service.LogDirsResult, error)) {
	if err := s.d.Ready(); err != nil {
		done(service.LogDirsResult{}, s.svcErr(err))
		return
	}
	res := service.LogDirsResult{Dir: s.d.DataDir}
	res.TotalBytes, res.UsableBytes = diskSpace(s.d.DataDir)
	view := s.d.View()
	// mu guards res.Replicas, pending and failed: the shards' answers
	// come back on from, or on each shard when from is nil.
	var mu sync.Mutex
	pending := len(s.d.Hosts)
	var failed error
	finish := func(logs []service.ReplicaLog, err error) {
		mu.Lock()
		res.Replicas = append(res.Replicas, logs...)
		if err != nil && failed == nil {
			failed = err
		}
		pending--
		last := pending == 0
		mu.Unlock()
		if !last {
			return
		}
		if failed != nil {
			done(service.LogDirsResult{}, failed)
			return
		}
		slices.SortFunc(res.Replicas, func(a, b service.ReplicaLog) int {
			return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
		})
		done(res, nil)
	}
	if pending == 0 {
		done(res, nil) // no shard, no replica
		return
	}
	for i := range s.d.Hosts {
		RunOn(from, s.d.Shards.Shard(i), nil, func(_ *shard.Shard, reply func([]service.ReplicaLog, error)) {
			var logs []service.ReplicaLog
			if h := s.d.Hosts[i]; h != nil {
				h.Each(func(r *partition.Replica) {
					cfg := r.Config()
					// The metadata group's own replica, and one of a topic
					// deleted or recreated under another id, is no topic's.
					if t := view.Topics[cfg.Topic]; t != nil && t.ID == cfg.TopicID {
						logs = append(logs, service.ReplicaLog{Topic: cfg.Topic, TopicID: t.ID, Partition: cfg.Partition,
							SizeBytes: r.Log().Size(), Primary: r.IsPrimary()})
					}
				})
			}
			reply(logs, nil)
		}, finish)
	}
}

// absDir is dir made absolute, as Kafka names its log directories (dir
// itself when the working directory cannot be read).
func absDir(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}

// diskSpace is the size and the free space (for an unprivileged user)
// of the file system holding dir, or -1 and -1 when it cannot be read
// (a simulated node's directory exists only in its FS).
func diskSpace(dir string) (total, usable int64) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return -1, -1
	}
	return int64(st.Blocks) * st.Bsize, int64(st.Bavail) * st.Bsize
}
