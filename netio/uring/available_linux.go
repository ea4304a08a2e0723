//go:build linux

package uring

import (
	"fmt"
	"sync"
)

var available struct {
	once sync.Once
	err  error
}

// Available reports whether this process may use the Engine: nil, or an
// error matching ErrUnavailable that says why not (io_uring_setup refused by
// seccomp or the kernel.io_uring_disabled sysctl, a kernel without
// IORING_FEAT_NODROP or without IORING_OP_WRITE/FSYNC, i.e. older than 5.6).
// The probe runs once per process; later calls return the same answer.
func Available() error {
	available.once.Do(func() { available.err = probeKernel() })
	return available.err
}

// probeKernel creates a tiny ring and checks the features and opcodes the
// Engine relies on.
func probeKernel() error {
	r, err := NewRing(RingOptions{Entries: 2})
	if err != nil {
		if _, ok := err.(*UnavailableError); ok {
			return err
		}
		return &UnavailableError{Reason: err.Error(), Err: err}
	}
	defer r.Close()
	if r.features&featNoDrop == 0 {
		return &UnavailableError{Reason: "kernel lacks IORING_FEAT_NODROP (Linux 5.5+)"}
	}
	missing, err := r.supports(opNop, opWrite, opFsync, opPollAdd)
	if err != nil {
		return &UnavailableError{Reason: "IORING_REGISTER_PROBE: " + err.Error(), Err: err}
	}
	if len(missing) > 0 {
		return &UnavailableError{Reason: fmt.Sprintf("kernel lacks io_uring opcodes %v (Linux 5.6+)", missing)}
	}
	return nil
}
