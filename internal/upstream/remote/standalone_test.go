package remote

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// streamWatch makes the fake server hold GET streams open, telling opened
// when one opens and closed when its client leaves.
func streamWatch(f *fakeServer) (opened, closed <-chan string) {
	o, c := make(chan string, 8), make(chan string, 8)
	f.get = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		sid := r.Header.Get("Mcp-Session-Id")
		o <- sid
		<-r.Context().Done()
		c <- sid
	}
	return o, c
}

// awaitStream returns what ch gives, failing the test after waitTimeout.
func awaitStream(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(waitTimeout):
		t.Fatalf("timed out waiting for %s", what)
		return ""
	}
}

// gets counts the GETs the fake server saw.
func gets(f *fakeServer) int {
	n := 0
	for _, s := range f.seen() {
		if s.method == http.MethodGet {
			n++
		}
	}
	return n
}

// TestResumedClientOpensStreamWhenHeld: a Client that resumed a session
// opens no standalone stream of its own, not at Start, not for its
// requests, not when it adopts a renewed session, until HoldStream(true);
// then exactly one, closed by HoldStream(false) and opened again by the
// next HoldStream(true).
func TestResumedClientOpensStreamWhenHeld(t *testing.T) {
	f := newFake(t)
	opened, closed := streamWatch(f)
	url := f.run()
	// Two sessions opened elsewhere, each with its opener's stream.
	for _, want := range []string{"sess-1", "sess-2"} {
		a, ra := start(t, Config{URL: url, Transport: TransportHTTP, KeepSession: true})
		initialize(t, a, ra)
		if got := awaitStream(t, opened, "the opener's stream"); got != want {
			t.Fatalf("the opener's stream is of %q, want %q", got, want)
		}
	}
	c, r := start(t, Config{URL: url, Transport: TransportHTTP, KeepSession: true,
		Resume: &Session{ID: "sess-1", Version: "2025-06-18"}})
	send(t, c, `{"jsonrpc":"2.0","id":"a","method":"tools/call"}`)
	if got := r.waitLine(`"id":"a"`); !strings.Contains(got, `"result"`) {
		t.Fatalf("reply through the resumed session: %s", got)
	}
	c.Adopt(Session{ID: "sess-2", Version: "2025-06-18"})
	send(t, c, `{"jsonrpc":"2.0","id":"b","method":"tools/call"}`)
	if got := r.waitLine(`"id":"b"`); !strings.Contains(got, `"result"`) {
		t.Fatalf("reply through the adopted session: %s", got)
	}
	c.HoldStream(false) // not held: nothing to let go
	if n := gets(f); n != 2 {
		t.Fatalf("the server saw %d GETs, want only the 2 openers': the resumed Client not holding the stream sent some", n)
	}

	c.HoldStream(true)
	if got := awaitStream(t, opened, "the held stream"); got != "sess-2" {
		t.Errorf("the held stream is of session %q, want the adopted sess-2", got)
	}
	c.HoldStream(true) // held already: no second stream
	c.HoldStream(false)
	if got := awaitStream(t, closed, "the stream let go"); got != "sess-2" {
		t.Errorf("closed the stream of %q", got)
	}
	c.HoldStream(true)
	awaitStream(t, opened, "the stream held again")
	if n := gets(f); n != 4 {
		t.Errorf("the server saw %d GETs, want 4 (the openers', one per HoldStream(true) after a let-go)", n)
	}
	select {
	case sid := <-opened:
		t.Errorf("another stream opened (%s)", sid)
	default:
	}
}

// TestInitializedClientIgnoresHoldStream: a Client that initialized its
// session holds its stream from notifications/initialized on, whatever
// HoldStream says (the replica that opened a session keeps it).
func TestInitializedClientIgnoresHoldStream(t *testing.T) {
	f := newFake(t)
	opened, closed := streamWatch(f)
	c, r := start(t, Config{URL: f.run(), Transport: TransportHTTP})
	initialize(t, c, r)
	awaitStream(t, opened, "the stream after notifications/initialized")
	c.HoldStream(false)
	send(t, c, `{"jsonrpc":"2.0","id":"a","method":"tools/call"}`)
	r.waitLine(`"id":"a"`)
	select {
	case <-closed:
		t.Error("HoldStream(false) closed an initialized Client's stream")
	default:
	}
}

// TestConflictDelayBounded: the retries of a GET refused with 409 start
// fast and never wait longer than maxConflictDelay, however many.
func TestConflictDelayBounded(t *testing.T) {
	for n := range 64 {
		d := conflictDelay(n)
		lo := min(minConflictDelay<<min(n, 10), maxConflictDelay) / 2
		if d < lo || d > maxConflictDelay {
			t.Fatalf("conflictDelay(%d) = %v, want in [%v, %v]", n, d, lo, maxConflictDelay)
		}
	}
}
