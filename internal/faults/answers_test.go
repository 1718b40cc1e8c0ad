package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/sse"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestFault3_PrettyPrintedBodies: requests, notifications and answers to
// server requests with newlines in them (pretty-printed, or terminated by
// "\n") are JSON and must work like compact ones.
func TestFault3_PrettyPrintedBodies(t *testing.T) {
	base := takeBaseline()
	journal := filepath.Join(t.TempDir(), "journal")
	m := marker(t, "pretty")
	g := startGateway(t, newConfig(chaosServer("pretty", testkit.ChaosOptions{Marker: m, Journal: journal})))
	c := g.client("pretty")
	c.connect(t)

	t.Run("request", func(t *testing.T) {
		body := "{\n  \"jsonrpc\": \"2.0\",\n  \"id\": 7,\n  \"method\": \"tools/call\",\n  \"params\": {\n    \"name\": \"echo\",\n    \"arguments\": {\"message\": \"pretty\"}\n  }\n}\n"
		r, err := c.post(body)
		if err := answeredOnce(r, err, "7"); err != nil {
			t.Fatal(err)
		}
		if text, err := toolText(r.final()); err != nil || text != "pretty" {
			t.Errorf("pretty-printed request: %q %v", text, err)
		}
		r, err = c.post(callBody("8", "echo", map[string]string{"message": "eol"}, "") + "\n")
		if err := answeredOnce(r, err, "8"); err != nil {
			t.Fatal(err)
		}
		if text, err := toolText(r.final()); err != nil || text != "eol" {
			t.Errorf("newline-terminated request: %q %v", text, err)
		}
	})

	t.Run("notification", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			req := c.request(http.MethodPost, callBody("9", "slow", map[string]int{"ms": 60000}, "")).WithContext(ctx)
			_, _ = c.do(req, nil) // a cancelled request gets no answer; cancel ends the wait
		}()
		testkit.WaitFor(t, "the slow call to reach the server", func() bool { return len(testkit.JournalLines(journal, "called slow")) > 0 })
		r, err := c.post("{\n  \"jsonrpc\": \"2.0\",\n  \"method\": \"notifications/cancelled\",\n  \"params\": {\"requestId\": 9, \"reason\": \"pretty\"}\n}\n")
		if err != nil || r.Status != http.StatusAccepted {
			t.Fatalf("pretty-printed notification: %v %+v", err, r)
		}
		// The server's record of cancellations shows whether it arrived.
		testkit.WaitFor(t, "the cancellation to reach the server", func() bool {
			r, err := c.post(callBody("10", "cancelled", map[string]any{}, ""))
			if err != nil {
				return false
			}
			text, err := toolText(r.final())
			return err == nil && text != "[]" && text != "null"
		})
	})

	t.Run("answer to a server request", func(t *testing.T) {
		req := c.request(http.MethodPost, callBody("11", "sample", map[string]string{"prompt": "hi"}, ""))
		r, err := c.do(req, func(raw json.RawMessage) {
			var m rpc
			if json.Unmarshal(raw, &m) != nil || m.Method != "sampling/createMessage" {
				return
			}
			answer := fmt.Sprintf("{\n  \"jsonrpc\": \"2.0\",\n  \"id\": %s,\n  \"result\": {\n    \"role\": \"assistant\",\n    \"model\": \"m\",\n    \"content\": {\"type\": \"text\", \"text\": \"pretty answer\"}\n  }\n}\n", m.ID)
			if r, err := c.post(answer); err != nil || r.Status != http.StatusAccepted {
				t.Errorf("pretty-printed answer to a server request: %v %+v", err, r)
			}
		})
		if err := answeredOnce(r, err, "11"); err != nil {
			t.Fatal(err)
		}
		if text, err := toolText(r.final()); err != nil || text != "pretty answer" {
			t.Errorf("sample with a pretty-printed answer: %q %v", text, err)
		}
	})
	g.stop()
	base.check(t, m)
}

// slowCallInFlight starts a slow call (id "1") on c and waits until the
// server has it; the returned channel yields the POST's outcome.
func slowCallInFlight(t *testing.T, c *client, journal string) <-chan error {
	t.Helper()
	res := make(chan error, 1)
	go func() {
		r, err := c.post(callBody("1", "slow", map[string]int{"ms": 600000}, ""))
		if err = answeredOnce(r, err, "1"); err == nil && r.final().Error == nil {
			err = fmt.Errorf("slow call succeeded: %s", r.Msgs)
		}
		res <- err
	}()
	testkit.WaitFor(t, "the slow call to reach the server", func() bool { return len(testkit.JournalLines(journal, "called slow")) > 0 })
	return res
}

// TestFault4_InFlightAtDelete: a request in flight when its session is
// deleted gets a JSON-RPC error on its stream, never an empty 202 or
// silence; for an SSE (2025-11-25) and a JSON (2025-03-26) session.
func TestFault4_InFlightAtDelete(t *testing.T) {
	for _, version := range []string{"2025-11-25", "2025-03-26"} {
		t.Run(version, func(t *testing.T) {
			base := takeBaseline()
			journal := filepath.Join(t.TempDir(), "journal")
			m := marker(t, "del")
			g := startGateway(t, newConfig(chaosServer("del", testkit.ChaosOptions{Marker: m, Journal: journal})))
			c := g.client("del")
			c.version = version
			c.connect(t)
			res := slowCallInFlight(t, c, journal)
			resp, err := g.hc.Do(c.request(http.MethodDelete, ""))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			select {
			case err := <-res:
				if err != nil {
					t.Errorf("request in flight at DELETE: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("request in flight at DELETE not answered within 5s")
			}
			g.stop()
			base.check(t, m)
		})
	}
}

// TestFault4_InFlightAtShutdown: a request in flight at shutdown gets a
// JSON-RPC error once the drain timeout passes, and shutdown stays within
// its bound.
func TestFault4_InFlightAtShutdown(t *testing.T) {
	for _, version := range []string{"2025-11-25", "2025-03-26"} {
		t.Run(version, func(t *testing.T) {
			base := takeBaseline()
			journal := filepath.Join(t.TempDir(), "journal")
			m := marker(t, "shut")
			g := startGateway(t, newConfig(chaosServer("shut", testkit.ChaosOptions{Marker: m, Journal: journal})))
			c := g.client("shut")
			c.version = version
			c.connect(t)
			res := slowCallInFlight(t, c, journal)
			g.stop()
			select {
			case err := <-res:
				if err != nil {
					t.Errorf("request in flight at shutdown: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Errorf("request in flight at shutdown not answered 5s after shutdown")
			}
			base.check(t, m)
		})
	}
}

// TestFault4_ProgressFloodKeepsFinalReply: in one 2025-03-26 batch stream,
// a fast call's final reply is followed by a flood of another call's
// progress, far more events than sseReplayEvents. The client reads one
// event and vanishes; resuming with Last-Event-ID must still deliver both
// final replies: progress is evicted, finals never.
func TestFault4_ProgressFloodKeepsFinalReply(t *testing.T) {
	base := takeBaseline()
	journal := filepath.Join(t.TempDir(), "journal")
	m := marker(t, "flood")
	cfg := newConfig(chaosServer("flood", testkit.ChaosOptions{Marker: m, Journal: journal}))
	cfg.Gateway.SSEReplayEvents = 32
	g := startGateway(t, cfg)
	c := g.client("flood")
	c.version = "2025-03-26"
	c.connect(t)

	batch := "[" + callBody("1", "echo", map[string]string{"message": "first"}, `{"progressToken":"t1"}`) + "," +
		callBody("2", "flood", map[string]int{"count": 3000}, `{"progressToken":"t2"}`) + "]"
	resp, err := g.hc.Do(c.request(http.MethodPost, batch))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body.Close()
		t.Fatalf("batch with progress tokens answered with %s, want SSE", resp.Header.Get("Content-Type"))
	}
	rd := sse.NewReader(resp.Body, 0)
	var got []json.RawMessage
	var lastID string
	for lastID == "" {
		ev, err := rd.Next()
		if err != nil {
			t.Fatalf("reading the first event: %v", err)
		}
		if len(ev.Data) > 0 {
			got = append(got, json.RawMessage(ev.Data))
		}
		lastID = ev.ID
	}
	resp.Body.Close() // vanish
	testkit.WaitFor(t, "the flood to be written", func() bool { return len(testkit.JournalLines(journal, "replied flood")) > 0 })

	req := c.request(http.MethodGet, "")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", lastID)
	r, err := c.do(req, nil)
	if err != nil {
		t.Fatalf("resuming: %v", err)
	}
	all := &reply{Msgs: append(got, r.Msgs...)}
	for _, id := range []string{"1", "2"} {
		if err := answeredOnce(all, nil, id); err != nil {
			t.Errorf("after resumption (status %d, %d events): %v", r.Status, len(r.Msgs), err)
		}
	}
	g.stop()
	base.check(t, m)
}

// TestFault4_HugeBatchAnswered: a 2025-03-26 batch of more requests than
// sseReplayEvents is answered in full.
func TestFault4_HugeBatchAnswered(t *testing.T) {
	base := takeBaseline()
	m := marker(t, "batch")
	g := startGateway(t, newConfig(fakeServer("batch", testkit.FakeOptions{Marker: m})))
	c := g.client("batch")
	c.version = "2025-03-26"
	c.connect(t)
	const n = 700 // > the default 512 events
	r, err := c.post(batchOfEchoes(1, n, 8))
	checkBatchAnswered(t, "huge batch", r, err, 1, n)
	g.stop()
	base.check(t, m)
}
