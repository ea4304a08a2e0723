package node

import (
	"context"
	"crypto/tls"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/corestream/corestream/client"
	"github.com/corestream/corestream/cluster/config"
)

// BenchmarkTLSListeners measures TLS on the native and Kafka ports
// against plaintext in the same run (one node in this process, loopback,
// fsync off): "one" is one 32-byte record produced at a time (the
// latency of one message, ns/op), "stream" keeps 1 KiB records flowing
// with batching (throughput, MB/s). Reproduce:
// go test -run '^$' -bench BenchmarkTLSListeners -benchtime 2s -count 3 ./cluster/node
func BenchmarkTLSListeners(b *testing.B) {
	for _, proto := range []string{"native", "kafka"} {
		for _, mode := range []string{"one", "stream"} {
			for _, sec := range []string{"plain", "tls"} {
				b.Run(proto+"-"+mode+"/"+sec, func(b *testing.B) { benchTLS(b, proto, mode, sec == "tls") })
			}
		}
	}
}

func benchTLS(b *testing.B, proto, mode string, tlsOn bool) {
	pki := newTestPKI(b, b.TempDir())
	n := runNode(b, b.TempDir(), func(c *config.Config) {
		c.Storage.Fsync = "never"
		withKafka(c)
		if tlsOn {
			pki.tlsOn(c, config.ListenerClient, config.ListenerKafka)
		}
	})
	svcCreate(b, n.svc, "bench", 1)
	var tc *tls.Config
	if tlsOn {
		tc = pki.clientTLS(b, "", time.Time{})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	small := []byte("a value of some thirty-two bytes")
	big := make([]byte, 1024)
	switch proto {
	case "native":
		cl, err := client.DialConfig(ctx, client.Config{Brokers: []string{n.ClientAddr()}, TLS: tc})
		if err != nil {
			b.Fatal(err)
		}
		defer cl.Close()
		linger := time.Duration(-1) // one record, sent at once
		if mode == "stream" {
			linger = time.Millisecond
		}
		p, err := cl.NewProducer(ctx, client.ProducerConfig{Linger: linger})
		if err != nil {
			b.Fatal(err)
		}
		defer p.Close(ctx)
		if mode == "one" {
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := p.Produce(ctx, client.Record{Topic: "bench", Value: small}); err != nil {
					b.Fatal(err)
				}
			}
			return
		}
		b.SetBytes(int64(len(big)))
		var wg sync.WaitGroup
		wg.Add(b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := p.ProduceAsync(ctx, client.Record{Topic: "bench", Value: big}, func(_ client.Produced, err error) {
				if err != nil {
					b.Error(err)
				}
				wg.Done()
			}); err != nil {
				b.Fatal(err)
			}
		}
		wg.Wait()
	case "kafka":
		opts := []kgo.Opt{kgo.SeedBrokers(n.KafkaAddr()), kgo.DefaultProduceTopic("bench"), kgo.RecordPartitioner(kgo.ManualPartitioner())}
		if tc != nil {
			opts = append(opts, kgo.DialTLSConfig(tc))
		}
		if mode == "one" {
			opts = append(opts, kgo.ProducerLinger(0))
		} else {
			opts = append(opts, kgo.ProducerLinger(time.Millisecond))
		}
		kc, err := kgo.NewClient(opts...)
		if err != nil {
			b.Fatal(err)
		}
		defer kc.Close()
		if err := kc.ProduceSync(ctx, &kgo.Record{Value: small}).FirstErr(); err != nil { // warm: metadata, connection
			b.Fatal(err)
		}
		if mode == "one" {
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := kc.ProduceSync(ctx, &kgo.Record{Value: small}).FirstErr(); err != nil {
					b.Fatal(err)
				}
			}
			return
		}
		b.SetBytes(int64(len(big)))
		var wg sync.WaitGroup
		wg.Add(b.N)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			kc.Produce(ctx, &kgo.Record{Value: big}, func(_ *kgo.Record, err error) {
				if err != nil {
					b.Error(err)
				}
				wg.Done()
			})
		}
		wg.Wait()
	}
}
