package remote

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestStatelessWithHeaders: a Stateless made by WithHeaders sends its own
// headers instead of the configured ones, over the same client; headers
// no request could carry are refused without quoting their value.
func TestStatelessWithHeaders(t *testing.T) {
	got := make(chan http.Header, 2)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
	}))
	defer ts.Close()
	s, err := NewStateless(Config{Name: "r", URL: ts.URL, Transport: TransportHTTP,
		Headers: map[string]string{"Authorization": "Bearer static", "X-Static": "s"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	alice, err := s.WithHeaders(map[string]string{"Authorization": "Bearer alice", "X-Static": "s"})
	if err != nil {
		t.Fatal(err)
	}
	alice.Close() // does nothing: s owns the client
	const call = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo",` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	for _, c := range []struct {
		s    *Stateless
		want string
	}{{alice, "Bearer alice"}, {s, "Bearer static"}} {
		var reply []byte
		c.s.Do(context.Background(), []byte(call), nil, nil, func(m []byte) { reply = m })
		h := <-got
		if h.Get("Authorization") != c.want || h.Get("X-Static") != "s" || !strings.Contains(string(reply), `"result"`) {
			t.Errorf("Authorization %q, X-Static %q, reply %s; want %q", h.Get("Authorization"), h.Get("X-Static"), reply, c.want)
		}
	}
	_, err = s.WithHeaders(map[string]string{"Authorization": "Bearer SECRET\r\nX-Evil: 1"})
	if err == nil || strings.Contains(err.Error(), "SECRET") {
		t.Errorf("WithHeaders with CR LF: %v", err)
	}
}
