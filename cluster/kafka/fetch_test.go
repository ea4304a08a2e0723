package kafka

import (
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/corestream/corestream/cluster/service"
	"github.com/corestream/corestream/segment/batch"
	"github.com/corestream/corestream/shard/partition"
)

// testBatch is a batch of count records at base, a control batch when
// control is set (the header fields are what stripControl reads).
func testBatch(t testing.TB, base int64, count int, control bool) []byte {
	t.Helper()
	b, err := batch.NewBuilder(batch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < count; i++ {
		if err := b.AppendKV(1, nil, []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	batch.SetBaseOffset(out, base)
	if control {
		const offAttributes = 21
		a := binary.BigEndian.Uint16(out[offAttributes:])
		binary.BigEndian.PutUint16(out[offAttributes:], a|batch.ControlBit)
	}
	return out
}

func TestStripControl(t *testing.T) {
	noop0 := testBatch(t, 0, 1, true)
	data1 := testBatch(t, 1, 3, false)
	noop4 := testBatch(t, 4, 1, true)
	data5 := testBatch(t, 5, 2, false)
	marker4 := batch.BuildTxnMarker(batch.TxnMarker{ProducerID: 3, Commit: true}, 1)
	batch.SetBaseOffset(marker4, 4)
	cat := func(bs ...[]byte) []byte {
		var out []byte
		for _, b := range bs {
			out = append(out, b...)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		in      []byte
		want    []byte
		next    int64
		dropped bool
	}{
		{"empty", nil, nil, 0, false},
		{"data only", cat(data1), cat(data1), 4, false},
		{"control only", cat(noop0), nil, 1, true},
		{"control between data", cat(noop0, data1, noop4, data5), cat(data1, data5), 7, true},
		{"control at the end", cat(data1, noop4), cat(data1), 5, true},
		{"a torn batch is kept", cat(noop0, data1[:20]), data1[:20], 1, true},
		// A transaction marker is Kafka's and is sent, as Kafka does.
		{"transaction marker kept", cat(data1, marker4, noop4, data5), cat(data1, marker4, data5), 7, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]byte(nil), tc.in...)
			got, next, dropped := stripControl(in)
			if string(got) != string(tc.want) || next != tc.next || dropped != tc.dropped {
				t.Fatalf("got %d bytes, next %d, dropped %v; want %d bytes, next %d, dropped %v",
					len(got), next, dropped, len(tc.want), tc.next, tc.dropped)
			}
		})
	}
}

func TestTrimToMaxBytes(t *testing.T) {
	resp := kmsg.NewPtrFetchResponse()
	for _, sizes := range [][]int{{0, 70}, {50, 20}} {
		rt := kmsg.NewFetchResponseTopic()
		for i, n := range sizes {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition, rp.RecordBatches = int32(i), make([]byte, n)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	// The first partition with records is kept whole though above the
	// bound; the next ones only while they fit.
	if got := trimToMaxBytes(resp, 60, func(b []byte) int { return len(b) }); got != 70 {
		t.Fatalf("kept %d bytes, want 70", got)
	}
	var lens []int
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			lens = append(lens, len(rp.RecordBatches))
		}
	}
	if fmt.Sprint(lens) != "[0 70 0 0]" {
		t.Fatalf("records per partition %v", lens)
	}
	resp.Topics[1].Partitions[0].RecordBatches = make([]byte, 50)
	resp.Topics[1].Partitions[1].RecordBatches = make([]byte, 20)
	resp.Topics[0].Partitions[1].RecordBatches = make([]byte, 10)
	if got := trimToMaxBytes(resp, 60, func(b []byte) int { return len(b) }); got != 60 {
		t.Fatalf("kept %d bytes, want 60 (10 + 50, then 20 would pass the bound)", got)
	}
}

// fakeService answers the calls a test needs; any other panics.
type fakeService struct {
	service.Service
	brokers []service.Broker
}

func (f fakeService) Brokers() []service.Broker { return f.brokers }

// A produce refused by a follower names the leader (KIP-951), and the
// answer lists that leader's Kafka address.
func TestLeaderHint(t *testing.T) {
	notPrimary := &service.Error{Kind: partition.ErrNotPrimary, Message: "x", Hint: &service.Hint{NodeID: 2, Generation: 7}}
	if id, epoch, ok := leaderHint(notPrimary); !ok || id != 2 || epoch != 7 {
		t.Fatalf("NOT_PRIMARY with a hint: %d %d %v", id, epoch, ok)
	}
	for _, err := range []error{
		&service.Error{Kind: partition.ErrNotPrimary, Message: "no hint"},
		&service.Error{Kind: service.ErrNotMetadataPrimary, Hint: &service.Hint{NodeID: 2}},
		errors.New("other"),
	} {
		if _, _, ok := leaderHint(err); ok {
			t.Errorf("%v gave a leader hint", err)
		}
	}
	l := New(fakeService{brokers: []service.Broker{{ID: 1, KafkaAddr: "10.0.0.1:9092"}, {ID: 2, KafkaAddr: "10.0.0.2:9093"},
		{ID: 3}}}, Config{})
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 10
	l.addLeaderEndpoints(resp, map[int32]bool{2: true, 3: true})
	if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 2 || resp.Brokers[0].Host != "10.0.0.2" || resp.Brokers[0].Port != 9093 {
		t.Fatalf("endpoints %+v (node 3 has no Kafka address)", resp.Brokers)
	}
}
