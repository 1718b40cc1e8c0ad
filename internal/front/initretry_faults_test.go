package front

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/mcpgate/mcpgate/internal/session"
)

// A server answering the client's initialize itself (session isolation, a
// remote) with a retryAfter of its own making: the 503's Retry-After is
// never more than maxRetryAfter. On the old code it was the server's
// number as given: a client told to wait 292 billion years.
func TestRetryAfterBounded(t *testing.T) {
	for _, after := range []string{"301", "86400", "9223372036854775807"} {
		reply := `{"jsonrpc":"2.0","id":0,"error":{"code":-32000,"message":"busy","data":{"retryAfter":` + after + `}}}`
		w := httptest.NewRecorder()
		if !writeRetryable(w, []session.Event{{Final: true, Data: []byte(reply)}}) {
			t.Fatalf("retryAfter %s: not answered 503", after)
		}
		got, err := strconv.Atoi(w.Header().Get("Retry-After"))
		if w.Code != http.StatusServiceUnavailable || err != nil || got < 1 || got > maxRetryAfter {
			t.Errorf("retryAfter %s: %d, Retry-After %q, want 1..%d", after, w.Code, w.Header().Get("Retry-After"), maxRetryAfter)
		}
	}
}
