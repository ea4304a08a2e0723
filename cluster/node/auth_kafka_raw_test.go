package node

import (
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/corestream/corestream/cluster/config"
)

// SASL after a v0 SaslHandshake, as Kafka serves it to older clients: the
// mechanism's tokens travel as bare size-prefixed frames, not in
// SaslAuthenticate requests. SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN log
// in and the connection then serves Metadata; a wrong password closes the
// connection (the raw exchange has no field for an error); ApiVersions
// lists SaslHandshake from v0, which librdkafka requires.
func TestKafkaSASLHandshakeV0(t *testing.T) {
	n := runNode(t, t.TempDir(), func(c *config.Config) {
		scramNode(c)
		withKafka(c)
	})
	waitUser(t, n.svc, "root", true)
	addr := n.KafkaAddr()

	// ApiVersions offers SaslHandshake 0..1.
	{
		rc := dialRawKafka(t, addr)
		resp := kmsg.NewPtrApiVersionsResponse()
		rc.call(t, kmsg.NewPtrApiVersionsRequest(), resp)
		found := false
		for _, k := range resp.ApiKeys {
			if k.ApiKey == 17 {
				found = true
				if k.MinVersion != 0 || k.MaxVersion != 1 {
					t.Fatalf("ApiVersions lists SaslHandshake %d..%d, want 0..1", k.MinVersion, k.MaxVersion)
				}
			}
		}
		if !found {
			t.Fatal("ApiVersions does not list SaslHandshake")
		}
	}

	login := func(m sasl.Mechanism) (*rawKafka, error) {
		rc := dialRawKafka(t, addr)
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 0, m.Name()
		hsResp := kmsg.NewPtrSASLHandshakeResponse()
		rc.call(t, hs, hsResp)
		if hsResp.ErrorCode != 0 {
			t.Fatalf("%s: SaslHandshake v0 error %d", m.Name(), hsResp.ErrorCode)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		sess, token, err := m.Authenticate(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 4; i++ { // SCRAM takes two round trips, PLAIN one
			if err := rc.writeFrame(token); err != nil {
				return nil, err
			}
			reply, err := rc.readFrame()
			if err != nil {
				return nil, err
			}
			done, next, err := sess.Challenge(reply)
			if err != nil {
				return nil, err
			}
			if done {
				return rc, nil
			}
			token = next
		}
		t.Fatalf("%s: the exchange did not end", m.Name())
		return nil, nil
	}

	for _, m := range []sasl.Mechanism{
		scram.Auth{User: "root", Pass: "rootpw"}.AsSha256Mechanism(),
		scram.Auth{User: "root", Pass: "rootpw"}.AsSha512Mechanism(),
		plain.Auth{User: "root", Pass: "rootpw"}.AsMechanism(),
	} {
		rc, err := login(m)
		if err != nil {
			t.Fatalf("%s after a v0 handshake: %v", m.Name(), err)
		}
		md := kmsg.NewPtrMetadataResponse()
		req := kmsg.NewPtrMetadataRequest()
		req.Version = 1
		rc.call(t, req, md)
		if len(md.Brokers) == 0 {
			t.Fatalf("%s: Metadata after logging in lists no broker", m.Name())
		}
	}

	// A wrong password closes the connection.
	rc, err := login(scram.Auth{User: "root", Pass: "nope"}.AsSha256Mechanism())
	if err == nil {
		_, err = rc.readFrame()
	}
	if !closedByServer(err) {
		t.Fatalf("a wrong password after a v0 handshake: %v, want the connection closed", err)
	}
}

// rawKafka is a Kafka connection driven frame by frame (the frame
// helpers of kafka_badinput_test.go).
type rawKafka struct {
	c    net.Conn
	corr int32
}

func dialRawKafka(t *testing.T, addr string) *rawKafka {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawKafka{c: c}
}

// writeFrame sends b as one size-prefixed frame with no Kafka header (a
// raw SASL token).
func (r *rawKafka) writeFrame(b []byte) error {
	_, err := r.c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...))
	return err
}

func (r *rawKafka) readFrame() ([]byte, error) { return readFrame(r.c) }

// call sends req at its version (non-flexible ones only: the response
// header is read as v0) and decodes its answer.
func (r *rawKafka) call(t *testing.T, req kmsg.Request, resp kmsg.Response) {
	t.Helper()
	if req.IsFlexible() {
		t.Fatal("rawKafka speaks non-flexible versions only")
	}
	r.corr++
	if _, err := r.c.Write(encoded(req, req.GetVersion(), r.corr)); err != nil {
		t.Fatal(err)
	}
	f, err := r.readFrame()
	if err != nil {
		t.Fatalf("%s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	if len(f) < 4 || int32(binary.BigEndian.Uint32(f)) != r.corr {
		t.Fatalf("%s: answer with another correlation id", kmsg.NameForKey(req.Key()))
	}
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(f[4:]); err != nil {
		t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
}
