package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mcpgate/mcpgate/internal/sse"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// Huge notifications between replies, read slowly: two sessions make a
// shared server write log notifications of 64 KiB to 1 MiB (each text its
// own) while two others echo texts of 10 bytes to 1 MiB through the same
// process. The stdout reader hands every line out as a slice of its one
// buffer, which the next line overwrites, and SSE events of 64 KiB or more
// go to the client straight from the stored message: a notification kept
// without a copy, or written from a buffer reused meanwhile, would reach a
// client with another line's bytes. The log sessions read their streams
// 1 KiB at a time, so each big event is written while the client lags.
// Every reply is checked byte for byte (id and text); every notification a
// session gets must be its own call's, whole. (Whether a log notification
// is delivered at all depends on how many sessions have calls in flight:
// a shared server's notification with no single owner is dropped, not
// broadcast; the test counts them and requires some.)
func TestHugeNotificationsBetweenReplies(t *testing.T) {
	g := startGateway(t, newConfig(fakeServer("echo", testkit.FakeOptions{})))
	const logSessions, echoSessions, calls = 2, 2, 5
	logSizes := []int{300 << 10, 1 << 20, 64 << 10, 700<<10 + 11, 65<<10 - 1}
	echoSizes := []int{10, 1<<20 + 3, 300, 64 << 10, 5000}
	var wg sync.WaitGroup
	var delivered atomic.Int64
	errs := make(chan error, logSessions+echoSessions)
	for s := range logSessions + echoSessions {
		c := g.client("echo")
		c.connect(t)
		if s < logSessions {
			askLogs(t, c)
		}
		wg.Go(func() {
			for i := range calls {
				mark := fmt.Sprintf("<s%d-c%d>", s, i)
				fill := string(rune('a' + (s*calls+i)%26))
				var err error
				if s < logSessions {
					size := logSizes[(s+i)%len(logSizes)]
					text := mark + strings.Repeat(fill, size-2*len(mark)) + mark
					var n int
					n, err = logOnce(g, c, fmt.Sprintf(`"log:%d:%d"`, s, i), text)
					delivered.Add(int64(n))
				} else {
					size := echoSizes[(s+i)%len(echoSizes)]
					text := mark + strings.Repeat(fill, max(0, size-2*len(mark))) + mark
					err = echoOnce(g, c, fmt.Sprintf("%d%018d", s+1, i), text)
				}
				if err != nil {
					errs <- fmt.Errorf("session %d call %d: %w", s, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// With the log sessions calling one after another and the echo
	// sessions finishing early, some log notifications have one owner.
	// Each log session's last call runs alone once the others are done,
	// unless the other log session is still in flight: call them once
	// more, one at a time, so that delivery is certain at least there.
	for s := range logSessions {
		c := g.client("echo")
		c.connect(t)
		askLogs(t, c)
		text := fmt.Sprintf("<alone%d>", s) + strings.Repeat("q", 200<<10)
		n, err := logOnce(g, c, fmt.Sprintf(`"alone:%d"`, s), text)
		if err != nil {
			t.Fatalf("alone %d: %v", s, err)
		}
		delivered.Add(int64(n))
	}
	t.Logf("%d log notifications delivered", delivered.Load())
	if delivered.Load() < logSessions {
		t.Fatalf("%d log notifications delivered, want at least %d (one per call made alone)", delivered.Load(), logSessions)
	}
}

// askLogs has c's session ask for log messages of every level: a shared
// server's log messages reach only sessions that asked.
func askLogs(t *testing.T, c *mcpClient) {
	t.Helper()
	r := c.post(t, `{"jsonrpc":"2.0","id":"level","method":"logging/setLevel","params":{"level":"debug"}}`)
	if m := r.final(t); m.Error != nil {
		t.Fatalf("logging/setLevel: %d %s", m.Error.Code, m.Error.Message)
	}
}

// logOnce calls the log tool with text, reading the SSE answer 1 KiB at a
// time, and checks that every notification is this call's log message,
// whole, and that the reply has id and says "logged". It returns how many
// notifications came.
func logOnce(g *testGateway, c *mcpClient, id, text string) (int, error) {
	resp, err := g.http.Do(c.request(http.MethodPost, callBody(id, "log", map[string]string{"level": "emergency", "message": text}, "")))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		return 0, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	var msgs [][]byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		rd := sse.NewReader(smallReads{resp.Body}, 0)
		for {
			ev, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return 0, fmt.Errorf("reading SSE: %w", err)
			}
			if len(ev.Data) > 0 {
				msgs = append(msgs, bytes.Clone(ev.Data))
			}
		}
	} else {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return 0, err
		}
		msgs = append(msgs, b)
	}
	if len(msgs) == 0 {
		return 0, fmt.Errorf("no messages")
	}
	notes := 0
	for k, m := range msgs {
		var r struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Data string `json:"data"`
			} `json:"params"`
			Result struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"result"`
		}
		if err := json.Unmarshal(m, &r); err != nil {
			return 0, fmt.Errorf("message %d: %v: %.200s", k, err, m)
		}
		if k < len(msgs)-1 {
			if r.Method != "notifications/message" || r.Params.Data != text {
				return 0, fmt.Errorf("message %d: %s with %d bytes of data (%.40q...), want this call's log message of %d bytes", k, r.Method, len(r.Params.Data), r.Params.Data, len(text))
			}
			notes++
			continue
		}
		if !bytes.Equal(r.ID, []byte(id)) {
			return 0, fmt.Errorf("reply id %s, want %s (%.200s)", r.ID, id, m)
		}
		if len(r.Result.Content) != 1 || r.Result.Content[0].Text != "logged" {
			return 0, fmt.Errorf("reply %.200s, want the text logged", m)
		}
	}
	return notes, nil
}

// smallReads reads at most 1 KiB per Read: a client that lags.
type smallReads struct{ r io.Reader }

func (s smallReads) Read(p []byte) (int, error) { return s.r.Read(p[:min(len(p), 1024)]) }

// A client that stops reading while a huge notification is written to it,
// other sessions' traffic meanwhile, and then a replay of the same events:
// the event (1.9 MiB, so the stdout reader's buffer, grown to 2 MiB, is
// kept and reused for the lines after it) goes to the client straight
// from the message its session stored, and the session keeps it for a
// resume. Another session's echoes of 300 KiB go through the same reader
// buffer, several times over, while the first client has read only the
// event's start. The lagging client must get its notification whole once
// it reads again, and again when it resumes the finished stream from its
// priming event: what the session keeps must be a copy, not the reader's
// bytes. (The replay fails when the mux stores the log message's line
// itself: it then carries echo bytes. The first read alone does not show
// it on this machine: the kernel takes the whole event into the socket's
// send buffer, up to 4 MiB, before the echoes start.)
func TestLaggingReaderOfAHugeNotification(t *testing.T) {
	g := startGateway(t, newConfig(fakeServer("echo", testkit.FakeOptions{})))
	lag, busy := g.client("echo"), g.client("echo")
	lag.connect(t)
	askLogs(t, lag)
	busy.connect(t)
	text := "<lag>" + strings.Repeat("L", 1900<<10) + "<lag>"
	resp, err := g.http.Do(lag.request(http.MethodPost, callBody(`"lag"`, "log", map[string]string{"level": "emergency", "message": text}, "")))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("answer of %s, want an SSE stream (a notification precedes the reply)", resp.Header.Get("Content-Type"))
	}
	// The event has begun; the rest waits in the gateway's write.
	first := make([]byte, 4096)
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		echo := fmt.Sprintf("<busy%d>", i) + strings.Repeat(string(rune('a'+i)), 300<<10)
		if err := echoOnce(g, busy, fmt.Sprintf(`"busy:%d"`, i), echo); err != nil {
			t.Fatalf("echo %d while the other client lags: %v", i, err)
		}
	}
	priming := checkLogStream(t, "the lagging read", io.MultiReader(bytes.NewReader(first), resp.Body), text)
	if priming == "" {
		t.Fatal("no priming event to resume from")
	}
	// More of the other session's traffic, then the replay.
	for i := range 4 {
		echo := fmt.Sprintf("<more%d>", i) + strings.Repeat(string(rune('p'+i)), 300<<10)
		if err := echoOnce(g, busy, fmt.Sprintf(`"more:%d"`, i), echo); err != nil {
			t.Fatalf("echo %d after: %v", i, err)
		}
	}
	req := getRequest(lag)
	req.Header.Set("Last-Event-ID", priming)
	again, err := g.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Body.Close()
	if again.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(again.Body, 300))
		t.Fatalf("resume from %s: status %d %s", priming, again.StatusCode, b)
	}
	checkLogStream(t, "the replay", again.Body, text)
}

// checkLogStream reads an SSE stream that must carry the log notification
// of text and then the reply "logged" to id "lag", and returns the id of
// its priming event ("" if none).
func checkLogStream(t *testing.T, what string, body io.Reader, text string) (priming string) {
	t.Helper()
	rd := sse.NewReader(body, 0)
	var msgs [][]byte
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: reading SSE: %v", what, err)
		}
		if len(ev.Data) > 0 {
			msgs = append(msgs, bytes.Clone(ev.Data))
		} else if priming == "" {
			priming = ev.ID
		}
	}
	if len(msgs) != 2 {
		t.Fatalf("%s: %d messages, want the log notification and the reply", what, len(msgs))
	}
	var note struct {
		Method string `json:"method"`
		Params struct {
			Data string `json:"data"`
		} `json:"params"`
	}
	if err := json.Unmarshal(msgs[0], &note); err != nil {
		t.Fatalf("%s: notification: %v: %.100s ... %.100s", what, err, msgs[0], msgs[0][max(0, len(msgs[0])-100):])
	}
	if note.Method != "notifications/message" || note.Params.Data != text {
		i := 0
		for i < min(len(note.Params.Data), len(text)) && note.Params.Data[i] == text[i] {
			i++
		}
		t.Fatalf("%s: %s of %d bytes, want the log message of %d bytes; they differ from byte %d: %.40q", what, note.Method, len(note.Params.Data), len(text), i, note.Params.Data[i:])
	}
	if !bytes.Contains(msgs[1], []byte(`"id":"lag"`)) || !bytes.Contains(msgs[1], []byte(`"logged"`)) {
		t.Fatalf("%s: reply %.200s", what, msgs[1])
	}
	return priming
}
