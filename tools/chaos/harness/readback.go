package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/netio/wire"
)

// readBack reads every partition from its start to its high watermark
// with a fresh consumer and checks it against the acknowledged writes.
func (r *run) readBack(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readBackWaitMax)
	defer cancel()
	ends := map[string]int64{}
	for _, w := range r.writers {
		name := w.part.String()
		for {
			rctx, rcancel := context.WithTimeout(ctx, requestWaitMax)
			lo, err := r.admin.ListOffsets(rctx, w.part.Topic, w.part.Partition, wire.TimestampLatest)
			rcancel()
			if err == nil {
				ends[name] = lo.Offset
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("chaos: the end of %s: %w", name, err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(settlePollEvery):
			}
		}
	}
	cs, err := r.readC.NewConsumer(client.ConsumerConfig{FetchMaxBytes: readFetchBytes})
	if err != nil {
		return err
	}
	defer cs.Close()
	for _, f := range r.o.Factors {
		if err := cs.Assign(ctx, topicPrefix+strconv.Itoa(f), nil, client.StartEarliest); err != nil {
			return fmt.Errorf("chaos: reading back: %w", err)
		}
	}
	read := map[string][]Written{}
	done := func() bool {
		for _, w := range r.writers {
			if pos, _ := cs.Position(w.part.Topic, w.part.Partition); pos < ends[w.part.String()] {
				return false
			}
		}
		return true
	}
	for !done() {
		recs, err := cs.Poll(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("chaos: reading back did not reach the high watermarks within %v (last error: %v)", readBackWaitMax, err)
		}
		for _, rec := range recs {
			name := fmt.Sprintf("%s/%d", rec.Topic, rec.Partition)
			read[name] = append(read[name], Written{Offset: rec.Offset, Key: append([]byte(nil), rec.Key...),
				Value: append([]byte(nil), rec.Value...)})
		}
	}
	r.logs = read
	r.rep.ViolationCounts = map[string]int{}
	for _, w := range r.writers {
		name := w.part.String()
		acked, _, _, _, _ := w.snapshot()
		res := Check(name, read[name], acked)
		r.rep.RecordsRead += res.Read
		r.rep.AckedChecked += res.AckedPresent
		r.rep.Unacked += res.Unacked
		r.rep.Violations = append(r.rep.Violations, res.Violations...)
		for k, v := range res.Counts {
			r.rep.ViolationCounts[k] += v
		}
	}
	r.logf("read back %d records: %d acknowledged writes found, %d violations", r.rep.RecordsRead, r.rep.AckedChecked, len(r.rep.Violations))
	return nil
}

// inSync is a replicated partition's high watermark and replicas once
// every replica has reached the primary's log end.
type inSync struct {
	name     string
	topic    wire.TopicID
	index    int32
	hw       int64
	replicas []int
}

// compareReplicas waits until every replica of every replicated
// partition has reached its primary's log end, stops the cluster
// gracefully, and compares the replicas' bytes below the high watermark.
func (r *run) compareReplicas(ctx context.Context) error {
	var parts []inSync
	ctx, cancel := context.WithTimeout(ctx, inSyncWaitMax)
	defer cancel()
	for _, w := range r.writers {
		if w.part.Factor < 2 {
			continue
		}
		name := w.part.String()
		why := ""
		for {
			rctx, rcancel := context.WithTimeout(ctx, requestWaitMax)
			d, err := r.admin.DescribePartition(rctx, w.part.Topic, w.part.Partition)
			rcancel()
			why = ""
			switch {
			case err != nil:
				why = err.Error()
			case len(d.Replicas) != len(d.Route.Replicas):
				why = fmt.Sprintf("%d replicas reported, %d placed", len(d.Replicas), len(d.Route.Replicas))
			case d.HighWatermark != d.LogEndOffset:
				why = fmt.Sprintf("high watermark %d, log end %d", d.HighWatermark, d.LogEndOffset)
			default:
				for _, rp := range d.Replicas {
					if rp.LogEndOffset != d.LogEndOffset {
						why = fmt.Sprintf("node %d at %d, primary at %d", rp.NodeID, rp.LogEndOffset, d.LogEndOffset)
					}
				}
			}
			if why == "" {
				p := inSync{name: name, topic: r.topics[w.part.Topic], index: w.part.Partition, hw: d.HighWatermark}
				for _, id := range d.Route.Replicas {
					p.replicas = append(p.replicas, int(id))
				}
				parts = append(parts, p)
				break
			}
			if ctx.Err() != nil {
				return fmt.Errorf("chaos: %s: replicas not in sync within %v: %s", name, inSyncWaitMax, why)
			}
			select {
			case <-ctx.Done():
			case <-time.After(settlePollEvery):
			}
		}
	}
	// Every node stops cleanly before its files are read.
	if err := r.cluster.Close(); err != nil {
		r.rep.StopErrors = err.Error()
	}
	for _, p := range parts {
		var first []byte
		firstNode := 0
		for _, id := range p.replicas {
			dir := partitionDir(r.plan.Nodes[id-1].DataDir, p.topic, p.index)
			data, err := readReplica(dir, filepath.Join(r.scratchDir(), fmt.Sprintf("node-%d-%x-%d", id, [16]byte(p.topic), p.index)), p.hw)
			if err != nil {
				r.rep.ReplicaMismatches = append(r.rep.ReplicaMismatches, fmt.Sprintf("%s: node %d: %v", p.name, id, err))
				continue
			}
			r.rep.ReplicasCompared++
			if first == nil {
				first, firstNode = data, id
				continue
			}
			if off := firstDifference(first, data); off != -1 {
				r.rep.ReplicaMismatches = append(r.rep.ReplicaMismatches,
					fmt.Sprintf("%s: nodes %d and %d differ below the high watermark %d (first at batch offset %d; -2: lengths)", p.name, firstNode, id, p.hw, off))
			}
		}
		r.rep.BytesCompared += int64(len(first))
	}
	r.logf("compared %d replicas of %d partitions: %d mismatches", r.rep.ReplicasCompared, len(parts), len(r.rep.ReplicaMismatches))
	return nil
}
