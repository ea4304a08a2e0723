// Package kafka is the Kafka wire protocol front end: a netio.Handler
// that speaks Kafka's request/response protocol on the node's Kafka port,
// so that Kafka clients (librdkafka and kcat, the Java client, franz-go,
// kafka-python, ...) use corestream unchanged.
//
// It is a codec and a handler in front of the node's typed service
// (Backend): kmsg (franz-go) decodes each request and encodes each
// response; the listener calls the service and maps its errors onto
// Kafka's codes through one table (errors.go), next to the native one.
// It keeps no partition state. Record batches need no translation: the
// log stores Kafka's RecordBatch v2 byte for byte, so a produced batch
// is appended as it came and a fetch answers the stored bytes.
//
// # Frames and order
//
// Kafka frames are the native protocol's: a 4-byte big-endian length,
// then the request header (api key, version, correlation id, client id,
// tagged fields for flexible versions). netio splits the stream; this
// package reads the header. Kafka clients expect answers in request
// order on a connection, while partitions answer from their own shards
// in any order, so each connection holds early answers until the ones
// before them are sent.
//
// # Bad input
//
// A frame without a readable header, an API key Kafka does not define,
// or a body that does not parse closes the connection, as a Kafka broker
// closes it; an API or version that is not served is answered with
// UNSUPPORTED_VERSION when its response has a top-level error code, and
// the connection is closed otherwise. No request goes unanswered: the
// client sees an error or a closed connection, never a hang.
// docs/kafka.md lists the APIs and versions served.
package kafka
