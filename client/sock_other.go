//go:build !linux

package client

import (
	"net"
	"time"
)

// capRetransmit does nothing off Linux (no TCP_RTO_MAX_MS).
func capRetransmit(net.Conn, time.Duration) {}
