package tlsbridge

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"strings"
	"sync/atomic"
)

// Reason is why a TLS session was refused, a label of
// corestream_tls_refused_total.
type Reason int

// The reasons, in the order of Stats.Refused.
const (
	// ReasonNotTLS: the peer did not speak TLS (a plaintext client on a
	// TLS port), or a TLS client met a plaintext port (CountPlaintextPeer).
	ReasonNotTLS Reason = iota
	// ReasonCertificate: a certificate was refused (unknown CA, expired,
	// wrong name) or a required client certificate was missing.
	ReasonCertificate
	// ReasonTimeout: the handshake did not finish in time.
	ReasonTimeout
	// ReasonLimit: too many sessions open or handshaking.
	ReasonLimit
	// ReasonOther: any other handshake or dial failure.
	ReasonOther
	reasons
)

// String is the reason's metric label.
func (r Reason) String() string {
	return [...]string{"not_tls", "certificate", "timeout", "limit", "other"}[r]
}

// Reasons lists every reason, for exporting Stats.
func Reasons() []Reason {
	out := make([]Reason, reasons)
	for i := range out {
		out[i] = Reason(i)
	}
	return out
}

// Stats counts one listener's TLS sessions. Safe for concurrent use.
type Stats struct {
	// Handshakes counts sessions that completed their handshake.
	Handshakes atomic.Uint64
	// Open is the number of bridged sessions open (handshaking or not).
	Open atomic.Int64
	// Bytes moved through the bridges, decrypted (In) and encrypted (Out).
	BytesIn, BytesOut atomic.Uint64
	refused           [reasons]atomic.Uint64
}

// Refused is the number of sessions refused for r.
func (s *Stats) Refused(r Reason) uint64 { return s.refused[r].Load() }

// classify says why a handshake or dial failed.
func classify(err error) Reason {
	var rh tls.RecordHeaderError
	var unknown x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var host x509.HostnameError
	var verify *tls.CertificateVerificationError
	var alert tls.AlertError
	switch {
	case errors.As(err, &rh):
		return ReasonNotTLS
	case errors.As(err, &unknown), errors.As(err, &invalid), errors.As(err, &host), errors.As(err, &verify):
		return ReasonCertificate
	case errors.Is(err, os.ErrDeadlineExceeded):
		return ReasonTimeout
	case errors.As(err, &alert):
		// The peer refused our certificate (bad_certificate 42,
		// unknown_ca 48, certificate_expired 45, certificate_required 116).
		switch alert {
		case 42, 43, 44, 45, 46, 48, 116:
			return ReasonCertificate
		}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ReasonTimeout
	}
	msg := err.Error()
	if strings.Contains(msg, "client didn't provide a certificate") || strings.Contains(msg, "certificate") {
		return ReasonCertificate
	}
	return ReasonOther
}

// explain turns a handshake error into what an operator should check.
func explain(r Reason, err error) string {
	switch r {
	case ReasonNotTLS:
		return "the peer does not speak TLS (a plaintext client on a TLS port?): " + err.Error()
	case ReasonCertificate:
		return "certificate refused (unknown CA, expired, wrong name, or a required client certificate missing): " + err.Error()
	case ReasonTimeout:
		return "TLS handshake not finished in time: " + err.Error()
	}
	return err.Error()
}

// LooksLikeTLS reports whether a plaintext listener's frame length
// prefix is the start of a TLS record (handshake content type 0x16,
// version 0x03xx): a TLS client on a plaintext port. Such a length is
// far above any frame limit, so it arrives as an oversize frame.
func LooksLikeTLS(size uint32) bool { return size>>24 == 0x16 && (size>>16)&0xff == 0x03 }

// CountRefused counts a session refused for r outside the bridge (a TLS
// client met on a plaintext listener).
func (s *Stats) CountRefused(r Reason) { s.refused[r].Add(1) }
