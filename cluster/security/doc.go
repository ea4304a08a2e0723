// Package security holds the broker's security rules as pure code: the
// permission rules and their evaluation, the login tokens the HTTP API
// issues, and the limiter of failed logins per address. It reads no
// clock, file or socket: time comes in as an argument, so every rule is
// a table test. The SCRAM credential and exchange live with the protocol
// (netio/wire/scram), because the Go SDK runs the client's side.
//
// Where the rules are applied: users and permissions live in the cluster
// metadata (cluster/metadata), and every front end (native protocol, HTTP,
// Kafka) authenticates a connection or request to a Principal and then
// calls the typed service through service.Guard, which refuses a call the
// principal's permissions do not allow with service.ErrAuthorization.
// docs/security.md describes the model.
package security
