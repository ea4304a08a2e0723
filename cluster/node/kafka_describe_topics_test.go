package node

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/corestream/corestream/cluster/config"
	"github.com/corestream/corestream/cluster/metadata"
	"github.com/corestream/corestream/cluster/security"
	"github.com/corestream/corestream/cluster/service"
)

// describeTopicPartitions sends one DescribeTopicPartitions request.
func describeTopicPartitions(t *testing.T, ctx context.Context, cl *kgo.Client, limit int32, cursor *kmsg.DescribeTopicPartitionsRequestCursor,
	topics ...string) *kmsg.DescribeTopicPartitionsResponse {
	t.Helper()
	req := kmsg.NewPtrDescribeTopicPartitionsRequest()
	req.ResponsePartitionLimit, req.Cursor = limit, cursor
	for _, name := range topics {
		rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		rt.Topic = name
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// describedTopics is an answer's topics as "name:code" and its partitions
// as "name/p".
func describedTopics(resp *kmsg.DescribeTopicPartitionsResponse) (topics, parts []string) {
	for _, rt := range resp.Topics {
		topics = append(topics, fmt.Sprintf("%s:%d", *rt.Topic, rt.ErrorCode))
		for _, p := range rt.Partitions {
			parts = append(parts, fmt.Sprintf("%s/%d", *rt.Topic, p.Partition))
		}
	}
	return topics, parts
}

// DescribeTopicPartitions (KIP-966) on one node: every topic in name
// order with Metadata's routes and ids and empty ELR lists; named topics
// in name order with Kafka's codes for the unknown and the invalid; an
// answer bounded by response_partition_limit with a next cursor that
// pages through every partition once, in order; a cursor whose topic is
// not among those named is INVALID_REQUEST.
func TestKafkaDescribeTopicPartitions(t *testing.T) {
	n := runNode(t, t.TempDir(), withKafka)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := kafkaClient(t, []string{n.KafkaAddr()})
	adm := kadm.NewClient(cl)
	for name, parts := range map[string]int32{"c": 1, "a": 3, "b": 2} {
		kafkaCreate(t, ctx, adm, name, parts, 1)
	}
	md, err := adm.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}

	resp := describeTopicPartitions(t, ctx, cl, 2000, nil)
	topics, parts := describedTopics(resp)
	if !slices.Equal(topics, []string{"a:0", "b:0", "c:0"}) || len(parts) != 6 || resp.NextCursor != nil {
		t.Fatalf("all topics: %v %v, cursor %+v", topics, parts, resp.NextCursor)
	}
	for _, rt := range resp.Topics {
		mt := md.Topics[*rt.Topic]
		if rt.TopicID != mt.ID || rt.IsInternal {
			t.Errorf("%s: id %x internal %v; Metadata's id %x", *rt.Topic, rt.TopicID, rt.IsInternal, mt.ID)
		}
		for _, p := range rt.Partitions {
			mp := mt.Partitions[p.Partition]
			if p.ErrorCode != 0 || p.LeaderID != mp.Leader || p.LeaderEpoch != mp.LeaderEpoch || !slices.Equal(p.Replicas, mp.Replicas) ||
				!slices.Equal(p.ISR, mp.ISR) || p.EligibleLeaderReplicas == nil || len(p.EligibleLeaderReplicas) != 0 || p.LastKnownELR == nil {
				t.Errorf("%s/%d: %+v; Metadata has %+v", *rt.Topic, p.Partition, p, mp)
			}
		}
	}

	named := describeTopicPartitions(t, ctx, cl, 2000, nil, "zz-unknown", "c", "bad name!", "a", "c")
	if topics, _ := describedTopics(named); !slices.Equal(topics, []string{"a:0",
		fmt.Sprintf("bad name!:%d", kerr.InvalidTopicException.Code), "c:0", fmt.Sprintf("zz-unknown:%d", kerr.UnknownTopicOrPartition.Code)}) {
		t.Errorf("named topics: %v", topics)
	}

	// Paging by 2: a/0 a/1 | a/2 b/0 | b/1 c/0, each cursor where the
	// next page starts.
	var paged, cursors []string
	var cursor *kmsg.DescribeTopicPartitionsRequestCursor
	for page := 0; ; page++ {
		if page == 10 {
			t.Fatalf("paging did not end: %v", paged)
		}
		resp := describeTopicPartitions(t, ctx, cl, 2, cursor)
		_, parts := describedTopics(resp)
		paged = append(paged, strings.Join(parts, " "))
		if resp.NextCursor == nil {
			break
		}
		cursors = append(cursors, fmt.Sprintf("%s/%d", resp.NextCursor.Topic, resp.NextCursor.Partition))
		cursor = &kmsg.DescribeTopicPartitionsRequestCursor{Topic: resp.NextCursor.Topic, Partition: resp.NextCursor.Partition}
	}
	if !slices.Equal(paged, []string{"a/0 a/1", "a/2 b/0", "b/1 c/0"}) || !slices.Equal(cursors, []string{"a/2", "b/1"}) {
		t.Errorf("pages %q, cursors %v", paged, cursors)
	}
	// A page that ends with a topic's last partition points at the next
	// topic's first, as Kafka's does.
	if resp := describeTopicPartitions(t, ctx, cl, 3, nil); resp.NextCursor == nil || resp.NextCursor.Topic != "b" || resp.NextCursor.Partition != 0 {
		t.Errorf("a page of a's 3 partitions: cursor %+v", resp.NextCursor)
	}
	// Named topics with a cursor: those before its topic are skipped.
	resp = describeTopicPartitions(t, ctx, cl, 2000, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "b", Partition: 1}, "a", "b", "c")
	if _, parts := describedTopics(resp); !slices.Equal(parts, []string{"b/1", "c/0"}) {
		t.Errorf("named from cursor b/1: %v", parts)
	}
	resp = describeTopicPartitions(t, ctx, cl, 2000, &kmsg.DescribeTopicPartitionsRequestCursor{Topic: "x"}, "a", "b")
	if topics, _ := describedTopics(resp); !slices.Equal(topics, []string{fmt.Sprintf("a:%d", kerr.InvalidRequest.Code), fmt.Sprintf("b:%d", kerr.InvalidRequest.Code)}) {
		t.Errorf("a cursor not among the topics: %v", topics)
	}
}

// With auth = scram a user sees, in DescribeTopicPartitions and
// DescribeLogDirs, only the topics it may describe: a named one it may
// not is TOPIC_AUTHORIZATION_FAILED without its id, listed last; an
// unnamed listing leaves it out.
func TestKafkaDescribeTopicsAuthorized(t *testing.T) {
	dir := t.TempDir()
	n := runNode(t, dir, func(c *config.Config) {
		scramNode(c)
		withKafka(c)
	})
	waitUser(t, n.svc, "root", true)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	as := func(u, p string) *kgo.Client {
		return kafkaClient(t, []string{n.KafkaAddr()}, kgo.SASL(scram.Auth{User: u, Pass: p}.AsSha512Mechanism()))
	}
	root := kadm.NewClient(as("root", "rootpw"))
	kafkaCreate(t, ctx, root, "orders", 1, -1)
	kafkaCreate(t, ctx, root, "payments", 1, -1)
	if _, err := changeUser(n.svc, &service.UserChange{Op: metadata.OpCreateUser, Name: "app", Password: "apppw", Rules: []security.Rule{
		{Allow: true, Op: security.OpRead, Topic: "orders"}}}); err != nil {
		t.Fatal(err)
	}
	waitUser(t, n.svc, "app", true)
	app := as("app", "apppw")

	resp := describeTopicPartitions(t, ctx, app, 2000, nil, "payments", "orders")
	topics, _ := describedTopics(resp)
	if !slices.Equal(topics, []string{"orders:0", fmt.Sprintf("payments:%d", kerr.TopicAuthorizationFailed.Code)}) ||
		resp.Topics[1].TopicID != [16]byte{} {
		t.Errorf("named: %v (refused id %x)", topics, resp.Topics[1].TopicID)
	}
	if topics, _ := describedTopics(describeTopicPartitions(t, ctx, app, 2000, nil)); !slices.Equal(topics, []string{"orders:0"}) {
		t.Errorf("all: %v", topics)
	}
	all, err := kadm.NewClient(app).DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	all.Each(func(d kadm.DescribedLogDir) {
		for topic := range d.Topics {
			listed = append(listed, topic)
		}
	})
	if !slices.Equal(listed, []string{"orders"}) {
		t.Errorf("log dirs list %v; want only orders", listed)
	}
}
