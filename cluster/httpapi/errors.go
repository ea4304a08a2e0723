package httpapi

import (
	"encoding/json"
	"errors"
	"github.com/corestream/corestream/cluster/service/wirecode"
	"net/http"

	"github.com/corestream/corestream/netio/wire"
)

// Errors of the HTTP API. Every error answer, whoever decides it (the
// router, the parser, the forwarder or the broker), has one shape:
//
//	{"error": {"code": "UNKNOWN_TOPIC_OR_PARTITION", "message": "…", "retriable": true,
//	           "retry_after_ms": 5, "hint": {"node_id": 2, "http_addr": "…", "generation": 7}}}
//
// code is a name from the wire error table (netio/wire/errors.go), so a
// script sees the same names as a client of the binary protocol;
// retriable is that table's flag; retry_after_ms and hint are present only
// when the broker gave them. The HTTP status follows from the code through
// httpStatusByCode, except where HTTP itself decides it (httpStatusError).

// httpStatusByCode maps every wire error code to the HTTP status of an
// answer carrying it. A test checks that every code of the wire table has
// an entry, so a new code must be given one here.
var httpStatusByCode = map[int16]int{
	wire.ErrUnknownServerError.Code:        http.StatusInternalServerError,
	wire.ErrInvalidRequest.Code:            http.StatusBadRequest,
	wire.ErrUnsupportedVersion.Code:        http.StatusBadRequest,
	wire.ErrCorruptMessage.Code:            http.StatusInternalServerError, // HTTP clients send no batches: a corrupt one is the server's
	wire.ErrMessageTooLarge.Code:           http.StatusRequestEntityTooLarge,
	wire.ErrUnknownTopicOrPartition.Code:   http.StatusNotFound,
	wire.ErrNotPrimary.Code:                http.StatusMisdirectedRequest,
	wire.ErrStaleGeneration.Code:           http.StatusMisdirectedRequest,
	wire.ErrPrimaryNotAvailable.Code:       http.StatusServiceUnavailable,
	wire.ErrNotMetadataPrimary.Code:        http.StatusMisdirectedRequest,
	wire.ErrRequestTimedOut.Code:           http.StatusGatewayTimeout,
	wire.ErrNotEnoughReplicas.Code:         http.StatusServiceUnavailable,
	wire.ErrMetadataNotReady.Code:          http.StatusServiceUnavailable,
	wire.ErrStorageError.Code:              http.StatusServiceUnavailable,
	wire.ErrOffsetOutOfRange.Code:          http.StatusRequestedRangeNotSatisfiable,
	wire.ErrTopicAlreadyExists.Code:        http.StatusConflict,
	wire.ErrInvalidTopicName.Code:          http.StatusBadRequest,
	wire.ErrInvalidPartitions.Code:         http.StatusBadRequest,
	wire.ErrInvalidReplicationFactor.Code:  http.StatusBadRequest,
	wire.ErrInvalidConfig.Code:             http.StatusBadRequest,
	wire.ErrDuplicateSequence.Code:         http.StatusConflict,
	wire.ErrOutOfOrderSequence.Code:        http.StatusConflict,
	wire.ErrInvalidProducerEpoch.Code:      http.StatusConflict,
	wire.ErrUnknownProducerID.Code:         http.StatusBadRequest,
	wire.ErrBusy.Code:                      http.StatusTooManyRequests,
	wire.ErrNotInSyncReplica.Code:          http.StatusServiceUnavailable,
	wire.ErrRebalanceInProgress.Code:       http.StatusServiceUnavailable,
	wire.ErrUnknownConsumer.Code:           http.StatusNotFound,
	wire.ErrInvalidConsumerName.Code:       http.StatusBadRequest,
	wire.ErrNotCoordinator.Code:            http.StatusMisdirectedRequest,
	wire.ErrNotReplica.Code:                http.StatusBadRequest,
	wire.ErrNodeNotAvailable.Code:          http.StatusServiceUnavailable,
	wire.ErrInvalidTimestamp.Code:          http.StatusBadRequest,
	wire.ErrInvalidOffset.Code:             http.StatusBadRequest,
	wire.ErrInvalidProducerIDMapping.Code:  http.StatusBadRequest,
	wire.ErrAuthorizationFailed.Code:       http.StatusForbidden,
	wire.ErrAuthenticationFailed.Code:      http.StatusUnauthorized,
	wire.ErrUserAlreadyExists.Code:         http.StatusConflict,
	wire.ErrUnknownUser.Code:               http.StatusNotFound,
	wire.ErrUnknownGroup.Code:              http.StatusNotFound,
	wire.ErrUnknownMember.Code:             http.StatusConflict,
	wire.ErrIllegalGeneration.Code:         http.StatusConflict,
	wire.ErrMemberIDRequired.Code:          http.StatusConflict,
	wire.ErrInconsistentGroupProtocol.Code: http.StatusConflict,
	wire.ErrInvalidSessionTimeout.Code:     http.StatusBadRequest,
	wire.ErrNonEmptyGroup.Code:             http.StatusConflict,
	wire.ErrGroupFull.Code:                 http.StatusConflict,
	wire.ErrFencedInstance.Code:            http.StatusConflict,
	wire.ErrCoordinatorNotAvailable.Code:   http.StatusServiceUnavailable,
	wire.ErrCoordinatorLoading.Code:        http.StatusServiceUnavailable,
	wire.ErrGroupSubscribedToTopic.Code:    http.StatusConflict,
	wire.ErrConcurrentTransactions.Code:    http.StatusServiceUnavailable,
	wire.ErrProducerFenced.Code:            http.StatusConflict,
	wire.ErrInvalidTxnState.Code:           http.StatusConflict,
	wire.ErrInvalidTransactionTimeout.Code: http.StatusBadRequest,
	wire.ErrUnstableOffsetCommit.Code:      http.StatusServiceUnavailable,
	wire.ErrTransactionalIDNotFound.Code:   http.StatusNotFound,
}

// httpStatusOf returns the status for a wire error: its table entry, or
// 500 for a code this build does not know.
func httpStatusOf(e *wire.Error) int {
	if s, ok := httpStatusByCode[e.Code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// httpStatusError is an error whose HTTP status HTTP itself decides rather
// than the code's table entry: no such route (404), a method the route
// does not serve (405, with Allow), a forwarding proof that does not verify
// (401), a body that did not arrive in time (408), a forward that did not
// reach the target (502).
type httpStatusError struct {
	status int
	// allow is the Allow header of a 405: the methods the path serves.
	allow string
	err   *wire.ErrorResponse
}

func (e *httpStatusError) Error() string { return e.err.Error() }
func (e *httpStatusError) Unwrap() error { return e.err }

// errorAnswer is the body of every error answer.
type errorAnswer struct {
	Error errorDetail `json:"error"`
}

// errorDetail is the error itself; see the package comment above.
type errorDetail struct {
	Code         string     `json:"code"`
	Message      string     `json:"message"`
	Retriable    bool       `json:"retriable"`
	RetryAfterMs uint32     `json:"retry_after_ms,omitempty"`
	Hint         *errorHint `json:"hint,omitempty"`
}

// errorHint names the node to send the request to instead (after
// NOT_PRIMARY, NOT_METADATA_PRIMARY, STALE_GENERATION), with that node's
// HTTP address: an HTTP caller cannot use the client address the binary
// protocol's hint carries.
type errorHint struct {
	NodeID     int32  `json:"node_id"`
	HTTPAddr   string `json:"http_addr"`
	Generation int32  `json:"generation"`
}

func (errorAnswer) httpAnswer() {}

// errorAnswerOf turns any error into its status and body. An error with
// no wire code is UNKNOWN_SERVER_ERROR (500) with the error's text.
// httpAddrOf resolves a hint's node id to its HTTP address.
func errorAnswerOf(err error, httpAddrOf func(int32) string) (status int, allow string, body errorAnswer) {
	var se *httpStatusError
	if errors.As(err, &se) {
		status, allow, err = se.status, se.allow, se.err
	}
	// The service's errors get their code from the one table (wirecode.Error),
	// as on the native port.
	err = wirecode.Error(err)
	er := &wire.ErrorResponse{Err: wire.ErrUnknownServerError, Message: err.Error()}
	var wer *wire.ErrorResponse
	var we *wire.Error
	switch {
	case errors.As(err, &wer) && wer.Err != nil:
		er = wer
	case errors.As(err, &we):
		er = &wire.ErrorResponse{Err: we, Message: we.Description}
	}
	if status == 0 {
		status = httpStatusOf(er.Err)
	}
	d := errorDetail{Code: er.Err.Name, Message: er.Message, Retriable: er.Err.Retriable, RetryAfterMs: er.RetryAfterMs}
	if d.Message == "" {
		d.Message = er.Err.Description
	}
	if h := er.Hint; h != nil && h.NodeID > 0 {
		d.Hint = &errorHint{NodeID: h.NodeID, HTTPAddr: httpAddrOf(h.NodeID), Generation: h.Generation}
	}
	return status, allow, errorAnswer{Error: d}
}

// httpAnswerer marks the types the HTTP API answers with. Each has
// explicit snake_case json tags on every field; TestHTTPAnswersAreSnakeCase
// walks them all.
type httpAnswerer interface{ httpAnswer() }

// writeJSON writes v as the JSON answer with status.
func writeJSON(w http.ResponseWriter, status int, v httpAnswerer) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// fail answers err in the error shape with its status.
func (h *API) fail(w http.ResponseWriter, err error) {
	status, allow, body := errorAnswerOf(err, h.httpAddrs)
	if allow != "" {
		w.Header().Set("Allow", allow)
	}
	writeJSON(w, status, body)
}
