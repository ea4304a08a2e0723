package client_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/client/clienttest"
)

// startBroker stands in for a real broker in these examples: an in-memory
// cluster serving the real protocol on a free loopback port.
func startBroker() (*clienttest.Cluster, string) {
	fc, err := clienttest.NewCluster(clienttest.Options{})
	if err != nil {
		log.Fatal(err)
	}
	return fc, fc.Addrs()[0]
}

// Create a topic, produce to it and read it back.
func Example() {
	fc, addr := startBroker() // a real application dials its brokers, e.g. "127.0.0.1:7070"
	defer fc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	c, err := client.Dial(ctx, addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, client.TopicSpec{Name: "greetings", Partitions: 1}); err != nil {
		log.Fatal(err)
	}

	p, err := c.NewProducer(ctx, client.ProducerConfig{})
	if err != nil {
		log.Fatal(err)
	}
	for _, v := range []string{"hello", "world"} {
		if err := p.ProduceAsync(ctx, client.Record{Topic: "greetings", Value: []byte(v)}, nil); err != nil {
			log.Fatal(err)
		}
	}
	if err := p.Close(ctx); err != nil { // flushes
		log.Fatal(err)
	}

	cs, err := c.NewConsumer(client.ConsumerConfig{})
	if err != nil {
		log.Fatal(err)
	}
	defer cs.Close()
	if err := cs.Assign(ctx, "greetings", nil, client.StartEarliest); err != nil {
		log.Fatal(err)
	}
	for n := 0; n < 2; {
		recs, err := cs.Poll(ctx)
		if err != nil {
			log.Fatal(err)
		}
		for _, r := range recs {
			fmt.Printf("%d: %s\n", r.Offset, r.Value)
			n++
		}
	}
	// Output:
	// 0: hello
	// 1: world
}

// Produce synchronously: Produce waits for the acknowledgement.
func ExampleProducer_Produce() {
	fc, addr := startBroker()
	defer fc.Close()
	fc.CreateTopic(clienttest.TopicSpec{Name: "orders", Partitions: 4})
	ctx := context.Background()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	p, err := c.NewProducer(ctx, client.ProducerConfig{Linger: -1}) // no batching delay
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)
	pr, err := p.Produce(ctx, client.Record{Topic: "orders", Key: []byte("customer-42"), Value: []byte("2 apples")})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("partition %d (Kafka would pick %d), offset %d\n", pr.Partition, client.KafkaPartition([]byte("customer-42"), 4), pr.Offset)
	// Output:
	// partition 1 (Kafka would pick 1), offset 0
}

// Produce asynchronously with a callback, then wait for everything.
func ExampleProducer_ProduceAsync() {
	fc, addr := startBroker()
	defer fc.Close()
	fc.CreateTopic(clienttest.TopicSpec{Name: "events", Partitions: 1})
	ctx := context.Background()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	p, err := c.NewProducer(ctx, client.ProducerConfig{})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close(ctx)
	acked := 0
	for i := 0; i < 1000; i++ {
		rec := client.Record{Topic: "events", Value: []byte(fmt.Sprint("event ", i))}
		err := p.ProduceAsync(ctx, rec, func(pr client.Produced, err error) {
			if err != nil {
				log.Printf("event lost: %v", err)
				return
			}
			acked++ // callbacks run one at a time
		})
		if err != nil {
			log.Fatal(err)
		}
	}
	if err := p.Flush(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(acked, "acknowledged")
	// Output:
	// 1000 acknowledged
}

// A consumer named "billing" resumes where it committed.
func ExampleConsumer_Commit() {
	fc, addr := startBroker()
	defer fc.Close()
	fc.CreateTopic(clienttest.TopicSpec{Name: "invoices", Partitions: 1})
	ctx := context.Background()
	c, err := client.Dial(ctx, addr)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	p, _ := c.NewProducer(ctx, client.ProducerConfig{Linger: time.Hour}) // one batch, sent by Close
	for _, v := range []string{"a", "b", "c"} {
		p.ProduceAsync(ctx, client.Record{Topic: "invoices", Value: []byte(v)}, nil)
	}
	p.Close(ctx)

	read := func(n int) {
		cs, err := c.NewConsumer(client.ConsumerConfig{Name: "billing", PollRecordsMax: n})
		if err != nil {
			log.Fatal(err)
		}
		defer cs.Close()
		if err := cs.Assign(ctx, "invoices", nil, client.StartCommitted(client.StartEarliest)); err != nil {
			log.Fatal(err)
		}
		recs, err := cs.Poll(ctx)
		if err != nil {
			log.Fatal(err)
		}
		var vals []string
		for _, r := range recs {
			vals = append(vals, string(r.Value))
		}
		fmt.Println(strings.Join(vals, " "))
		if err := cs.Commit(ctx); err != nil { // stores the position after recs
			log.Fatal(err)
		}
	}
	read(2)
	read(2)
	// Output:
	// a b
	// c
}
