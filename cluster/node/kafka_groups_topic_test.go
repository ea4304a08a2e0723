package node

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// One FindCoordinator that reaches a node other than the metadata
// primary, before any group exists, gets the groups topic created, as a
// Kafka broker creates its offsets topic at the first FindCoordinator
// whatever broker it reaches: the node asks the metadata primary (the
// only node that proposes) over the peer link, and the topic is then
// listed as __consumer_offsets by that node. franz-go's TestConsumeRegex
// sends just that one request and waits for the topic in Metadata.
func TestKafkaFindCoordinatorOnFollowerCreatesGroupsTopic(t *testing.T) {
	tc, kports := startKafkaCluster(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	primary := metaPrimaryByRoute(t, tc)
	other := 1
	if other == int(primary.self) {
		other = 2
	}
	cl := kafkaClient(t, kports)
	br := cl.Broker(other)

	find := kmsg.NewPtrFindCoordinatorRequest()
	find.CoordinatorKey, find.CoordinatorKeys = "regex-group", []string{"regex-group"}
	if _, err := br.Request(ctx, find); err != nil {
		t.Fatalf("FindCoordinator of node %d: %v", other, err)
	}
	clusterWait(t, 30*time.Second, kafkaConsumerOffsets+" listed by node "+kports[other-1], func() bool {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(kafkaConsumerOffsets)
		req.Topics = append(req.Topics, rt)
		raw, err := br.Request(ctx, req)
		if err != nil {
			return false
		}
		for _, tp := range raw.(*kmsg.MetadataResponse).Topics {
			if tp.ErrorCode == 0 && tp.Topic != nil && *tp.Topic == kafkaConsumerOffsets && tp.IsInternal && len(tp.Partitions) > 0 {
				return true
			}
		}
		return false
	})
}
