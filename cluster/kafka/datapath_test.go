package kafka

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/cluster/frontend"
	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/netio"
	"github.com/corestream/corestream/shard"
)

// The data path's shared optimisations on the Kafka listener (produce.go,
// fetch.go, cluster/frontend), against a service that serves partition p
// on shard p mod 2 by the node's rule: inline on the caller's shard,
// where it may call Lend, else on the owner's with a copy.

// dataService records, for each call, the shard it came from; it lends
// what the node's log would (every batch of lendBytesMin and more, on
// the caller's shard) and keeps the lent bytes until release is called.
type dataService struct {
	service.Service
	g *shard.Group

	mu    sync.Mutex
	froms []int
	lent  []lentBatch
}

type lentBatch struct {
	mem, copy []byte
	release   func()
}

const lendBytesMin = 48 << 10

func (f *dataService) note(from *shard.Shard) {
	f.mu.Lock()
	f.froms = append(f.froms, from.ID())
	f.mu.Unlock()
}

// serve runs fn on the partition's shard and done's answer back on from.
func (f *dataService) serve(from *shard.Shard, p int32, fn func(), done func()) {
	owner := f.g.Shard(int(p) % 2)
	if owner == from {
		fn()
		done()
		return
	}
	_ = owner.Post(func() {
		fn()
		_ = from.Post(done)
	})
}

func (f *dataService) Produce(from *shard.Shard, req *service.ProduceRequest, done func(service.ProduceResult, error)) {
	f.note(from)
	if int(req.Partition)%2 == from.ID() && req.Lend != nil && len(req.Records) >= lendBytesMin {
		if release := req.Lend(); release != nil {
			f.mu.Lock()
			f.lent = append(f.lent, lentBatch{mem: req.Records, copy: bytes.Clone(req.Records), release: release})
			f.mu.Unlock()
		}
	}
	records := bytes.Clone(req.Records) // the node's detach (or the log's copy)
	f.serve(from, req.Partition, func() { _ = records }, func() { done(service.ProduceResult{BaseOffset: 0}, nil) })
}

func (f *dataService) Fetch(from *shard.Shard, req *service.FetchRequest, done func(service.FetchResult, error)) {
	f.note(from)
	f.serve(from, req.Partition, func() {}, func() { done(service.FetchResult{PreferredReadReplica: service.NoReplica}, nil) })
}

// lastFrom is the shard the last call came from.
func (f *dataService) lastFrom() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.froms[len(f.froms)-1]
}

// checkLent reports whether every lent batch is unchanged, and releases
// them (on their shard).
func (f *dataService) checkLent(t *testing.T) int {
	f.mu.Lock()
	lent := f.lent
	f.lent = nil
	f.mu.Unlock()
	for i, b := range lent {
		if !bytes.Equal(b.mem, b.copy) {
			t.Errorf("lent batch %d changed before it was released", i)
		}
	}
	return len(lent)
}

type dataRig struct {
	svc        *dataService
	addr       string
	migrations atomic.Uint64
	cross      atomic.Uint64
	g          *shard.Group
}

func startDataRig(t *testing.T) *dataRig {
	g, err := shard.NewGroup(shard.Config{Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	r := &dataRig{svc: &dataService{g: g}, g: g}
	mover := frontend.NewMover(frontend.Config{Group: g, Migrations: &r.migrations, CrossShard: &r.cross,
		OwnerShard: func(_ string, p int32) int { return int(p) % 2 }})
	srv, err := netio.NewServer(g, netio.Config{}, New(r.svc, Config{Mover: mover}))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	r.addr = srv.Addr().String()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		if err := g.Stop(); err != nil {
			t.Errorf("group stop: %v", err)
		}
	})
	return r
}

type kafkaTestClient struct {
	t    *testing.T
	conn net.Conn
	corr int32
	f    *kmsg.RequestFormatter
}

func (r *dataRig) dial(t *testing.T) *kafkaTestClient {
	c, err := net.DialTimeout("tcp", r.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &kafkaTestClient{t: t, conn: c, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("datapath-test"))}
}

// roundTrip sends req and reads its answer into resp.
func (c *kafkaTestClient) roundTrip(req kmsg.Request, resp kmsg.Response) {
	c.t.Helper()
	c.corr++
	if _, err := c.conn.Write(c.f.AppendRequest(nil, req, c.corr)); err != nil {
		c.t.Fatal(err)
	}
	_ = c.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c.conn, size[:]); err != nil {
		c.t.Fatal(err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c.conn, body); err != nil {
		c.t.Fatal(err)
	}
	if corr := int32(binary.BigEndian.Uint32(body)); corr != c.corr {
		c.t.Fatalf("answer to %d, want %d", corr, c.corr)
	}
	body = body[4:]
	if resp.IsFlexible() {
		body = body[1:] // an empty tag section (the test asks nothing with tags)
	}
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		c.t.Fatal(err)
	}
}

// produce sends one produce of a batch of size bytes (filled with fill)
// to each partition and checks that each was acknowledged.
func (c *kafkaTestClient) produce(size int, fill byte, parts ...int32) {
	c.t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 7, -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "t"
	for _, p := range parts {
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Partition, rp.Records = p, bytes.Repeat([]byte{fill + byte(p)}, size)
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := kmsg.NewPtrProduceResponse()
	c.roundTrip(req, resp)
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				c.t.Fatalf("partition %d: error %d", p.Partition, p.ErrorCode)
			}
		}
	}
}

// fetch sends one fetch without waiting for the partitions.
func (c *kafkaTestClient) fetch(parts ...int32) {
	c.t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.Version, req.MaxWaitMillis, req.MaxBytes = 4, 0, 1<<20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "t"
	for _, p := range parts {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.PartitionMaxBytes = p, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	c.roundTrip(req, kmsg.NewPtrFetchResponse())
}

// A produce of several partitions lends the read buffer for each large
// batch served on the connection's shard (two here), and none for a
// small one or one served by the other shard; the lent bytes stay intact
// while later requests are read.
func TestProduceLendsEachLargeBatch(t *testing.T) {
	r := startDataRig(t)
	c := r.dial(t)
	c.produce(100, 'a', 0) // a small batch: not lent
	home := int32(r.svc.lastFrom())
	other := 1 - home
	c.produce(32<<10, 'b', home, other, home+2) // 96 KiB: the frame can be retained
	c.produce(1<<10, 'c', other, other)         // later frames overwrite the read buffer
	c.produce(1<<10, 'd', home)
	if n := r.svc.checkLent(t); n != 0 {
		t.Fatalf("%d batches of 32 KiB lent, want none (below the log's threshold)", n)
	}
	c.produce(50<<10, 'e', home, home+2) // 100 KiB: both lent
	c.produce(60<<10, 'f', other)        // served by the other shard: copied
	c.produce(16<<10, 'g', home, other, home, other)
	if n := r.svc.checkLent(t); n != 2 {
		t.Fatalf("%d batches lent, want 2 (the large ones of the connection's shard)", n)
	}

}

// A connection whose produce requests all go to partitions of the other
// shard moves there after frontend.MigrateAfter of them; a request that
// spreads over both shards ends the streak.
func TestProduceConnectionMoves(t *testing.T) {
	r := startDataRig(t)
	c := r.dial(t)
	c.produce(10, 'a', 0)
	home := int32(r.svc.lastFrom())
	other := 1 - home
	for i := 0; i < 2*frontend.MigrateAfter; i++ {
		c.produce(10, 'b', other, home) // spread: stays
	}
	if n := r.migrations.Load(); n != 0 {
		t.Fatalf("a connection spreading its produce over both shards moved %d times", n)
	}
	for i := 0; i < frontend.MigrateAfter; i++ {
		c.produce(10, 'c', other, other+2)
		if from := r.svc.lastFrom(); from != int(home) {
			t.Fatalf("request %d served from shard %d before the streak was reached", i, from)
		}
	}
	c.produce(10, 'd', other)
	if from := r.svc.lastFrom(); from != int(other) {
		t.Fatalf("after %d produce requests for shard %d the connection is still on %d", frontend.MigrateAfter, other, from)
	}
	if n := r.migrations.Load(); n != 1 {
		t.Fatalf("migrations %d, want 1", n)
	}
	// 2 per spread request (one partition crossed), 2 per streak request.
	if n, want := r.cross.Load(), uint64(2*frontend.MigrateAfter+2*frontend.MigrateAfter); n != want {
		t.Fatalf("cross-shard calls %d, want %d", n, want)
	}
}

// The same for a consumer's fetch requests.
func TestFetchConnectionMoves(t *testing.T) {
	r := startDataRig(t)
	c := r.dial(t)
	c.fetch(0)
	home := int32(r.svc.lastFrom())
	other := 1 - home
	for i := 0; i < frontend.MigrateAfter; i++ {
		c.fetch(other, other+2)
	}
	c.fetch(other)
	if from := r.svc.lastFrom(); from != int(other) {
		t.Fatalf("after %d fetch requests for shard %d the connection is still on %d", frontend.MigrateAfter, other, from)
	}
	if n := r.migrations.Load(); n != 1 {
		t.Fatalf("migrations %d, want 1", n)
	}
}
