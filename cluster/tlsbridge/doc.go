// Package tlsbridge serves TLS on the shards' own listeners (the native
// client port, the Kafka port, the replication links) without running
// crypto in the shards' event loops.
//
// The loops read and write plain sockets with epoll, writev and
// sendfile; crypto/tls wants a blocking net.Conn. So Go's crypto/tls
// accepts (or dials) each TLS session in goroutines, and each session is
// bridged to a shard through a unix socketpair: the bridge decrypts what
// the peer sends into the pair and encrypts what the shard writes (frames
// and sendfile ranges alike), and netio serves the pair's other end as an
// ordinary connection (netio.Server.Adopt, AdoptDialed) that carries the
// peer's real address. A plaintext listener does not pass here and is
// served exactly as before. docs/design/tls.md has the measurements.
//
//	peer ==TLS== [goroutines: crypto/tls] --socketpair-- shard loop (netio)
//
// A session that fails its handshake (a plaintext client, an unknown CA,
// an expired certificate, a missing client certificate, a handshake not
// finished within Config.HandshakeTimeout) is closed, logged once with the
// peer's address and the reason (at most logLinesMax lines per
// logInterval) and counted by reason in Stats.
package tlsbridge
