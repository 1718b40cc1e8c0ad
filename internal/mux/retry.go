package mux

import (
	"errors"
	"strconv"
	"time"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
)

// retryError is the client-visible error of a server that is starting or
// backing off: trying again later may work, and RetryAfter says when (the
// next start, or the end of the gateway's own initialize of the process
// that is starting). The HTTP front turns it into Retry-After.
type retryError struct {
	err   error
	after time.Duration
}

func (e *retryError) Error() string { return e.err.Error() }
func (e *retryError) Unwrap() error { return e.err }

// RetryAfter is when trying again makes sense, at least a second.
func (e *retryError) RetryAfter() time.Duration { return max(e.after, time.Second) }

// retryLater wraps err with when to try again.
func retryLater(err error, after time.Duration) error {
	return &retryError{err: err, after: after}
}

// errorReply is the JSON-RPC error answering request id with err. An error
// that says when to retry carries it as the error's data, in whole seconds
// rounded up as Retry-After counts them: {"retryAfter":3}.
func errorReply(id []byte, code int, err error) []byte {
	b := jsonrpc.ErrorResponse(id, code, err.Error())
	var re *retryError
	if !errors.As(err, &re) {
		return b
	}
	secs := int64((re.RetryAfter() + time.Second - 1) / time.Second)
	b = b[:len(b)-2] // the error object's and the message's closing braces
	b = append(b, `,"data":{"retryAfter":`...)
	b = strconv.AppendInt(b, secs, 10)
	return append(b, `}}}`...)
}
