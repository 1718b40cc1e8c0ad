package front

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mcpgate/mcpgate/internal/session"
)

func TestWriteRetryable(t *testing.T) {
	for _, tc := range []struct {
		reply  string
		status int // 0: not written
		after  string
	}{
		{`{"jsonrpc":"2.0","id":0,"error":{"code":-32000,"message":"starting","data":{"retryAfter":7}}}`, http.StatusServiceUnavailable, "7"},
		{`{"jsonrpc":"2.0","id":0,"error":{"code":-32000,"message":"failed"}}`, 0, ""},
		{`{"jsonrpc":"2.0","id":0,"error":{"code":-32000,"message":"x","data":{"retryAfter":0}}}`, 0, ""},
		{`{"jsonrpc":"2.0","id":0,"error":{"code":-32000,"message":"x","data":{"retryAfter":"soon"}}}`, 0, ""},
		{`{"jsonrpc":"2.0","id":0,"error":{"code":-32000,"message":"x","data":"retryAfter"}}`, 0, ""},
		{`{"jsonrpc":"2.0","id":0,"result":{"data":{"retryAfter":3}}}`, 0, ""},
	} {
		w := httptest.NewRecorder()
		ok := writeRetryable(w, []session.Event{{Final: true, Data: []byte(tc.reply)}})
		if ok != (tc.status != 0) {
			t.Errorf("%s: written %v", tc.reply, ok)
			continue
		}
		if !ok {
			continue
		}
		if w.Code != tc.status || w.Header().Get("Retry-After") != tc.after || w.Body.String() != tc.reply {
			t.Errorf("%s: %d, Retry-After %q, body %s", tc.reply, w.Code, w.Header().Get("Retry-After"), w.Body)
		}
	}
}

// FuzzRetryAfterOf: any reply gives a positive number of seconds or
// nothing, never a panic.
func FuzzRetryAfterOf(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":0,"error":{"code":-32000,"message":"x","data":{"retryAfter":7}}}`))
	f.Add([]byte(`{"error":{"data":{"retryAfter":-1}}}`))
	f.Add([]byte(`{"error":null}`))
	f.Fuzz(func(t *testing.T, reply []byte) {
		if secs, ok := retryAfterOf(reply); ok && (secs <= 0 || secs > maxRetryAfter) {
			t.Fatalf("retryAfter %d accepted", secs)
		}
	})
}
