package front

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/mcpgate/mcpgate/internal/session"
)

// writeRetryable answers a failed initialize whose one reply is an error
// saying when to retry (the multiplexer adds {"retryAfter": seconds} as
// the error's data when the server is starting or backing off) with 503
// and that Retry-After, rather than 200: a client or a proxy that knows
// HTTP, not JSON-RPC, sees that the failure is temporary and when to try
// again. It reports false, writing nothing, for any other answer.
func writeRetryable(w http.ResponseWriter, evs []session.Event) bool {
	if len(evs) != 1 || evs[0].Data == nil {
		return false
	}
	secs, ok := retryAfterOf(evs[0].Data)
	if !ok {
		return false
	}
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h.Set("Retry-After", strconv.FormatInt(secs, 10))
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(evs[0].Data)
	return true
}

// maxRetryAfter bounds the Retry-After of a failed initialize. The error
// may be a server's own (a session-isolated or remote server answers the
// client's initialize itself), so its retryAfter is the server's to make
// up: a client told to wait a year would never come back. The gateway's
// own values (a backoff, the end of a first start's initTimeout) are
// rarely longer; a client retrying sooner is told again.
const maxRetryAfter = 300

// retryAfterOf returns the error data's "retryAfter" of a JSON-RPC error
// response, when it is a positive whole number of seconds, at most
// maxRetryAfter.
func retryAfterOf(reply []byte) (int64, bool) {
	var env struct {
		Error *struct {
			Data struct {
				RetryAfter int64 `json:"retryAfter"`
			} `json:"data"`
		} `json:"error"`
	}
	if json.Unmarshal(reply, &env) != nil || env.Error == nil || env.Error.Data.RetryAfter <= 0 {
		return 0, false
	}
	return min(env.Error.Data.RetryAfter, maxRetryAfter), true
}
