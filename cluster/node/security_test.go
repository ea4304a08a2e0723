package node

import "testing"

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7070": true, "[::1]:7070": true, "localhost:1": true,
		"0.0.0.0:7070": false, ":7070": false, "10.0.0.5:7070": false, "[::]:1": false, "broker.example:1": false,
	} {
		if got := loopback(addr); got != want {
			t.Errorf("loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
