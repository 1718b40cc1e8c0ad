package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgate/mcpgate/internal/sse"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// Big and small echoes at once through one shared stdio server, every
// reply checked byte for byte: its id as sent and its text as sent. The
// request body's chunks, the spliced request and the stdin queue's copy
// are pooled buffers, and the stdout reader hands out slices of its own
// buffer; a buffer given back while another goroutine still read it, or
// a line overwritten before the mux had copied it, would show here as a
// reply with another call's bytes (and under -race as a race).
func TestBigAndSmallEchoesConcurrently(t *testing.T) {
	g := startGateway(t, newConfig(fakeServer("echo", testkit.FakeOptions{})))
	sizes := []int{10, 1<<20 + 3, 300, 64 << 10, 1<<20 - 7, 5000, 300<<10 + 1}
	const sessions, calls = 4, 7
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for s := range sessions {
		c := g.client("echo")
		c.connect(t)
		wg.Go(func() {
			for i := range calls {
				// Each call's text is its own: a marker, then a filler byte
				// that differs between calls, then the marker again.
				mark := fmt.Sprintf("<s%d-c%d>", s, i)
				size := sizes[(s+i)%len(sizes)]
				text := mark + strings.Repeat(string(rune('a'+(s*calls+i)%26)), max(0, size-2*len(mark))) + mark
				id := fmt.Sprintf(`"big:%d:%d"`, s, i)
				if i%2 == 1 {
					id = fmt.Sprintf("%d%018d", s+1, i) // a number past 2^53, kept as written
				}
				if err := echoOnce(g, c, id, text); err != nil {
					errs <- fmt.Errorf("session %d call %d (%d bytes): %w", s, i, len(text), err)
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
}

// echoOnce calls echo with text and checks the reply: id byte for byte,
// text whole. Safe to call from any goroutine (it reports, not fails).
func echoOnce(g *testGateway, c *mcpClient, id, text string) error {
	resp, err := g.http.Do(c.request(http.MethodPost, callBody(id, "echo", map[string]string{"message": text}, "")))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	var msg []byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		rd := sse.NewReader(resp.Body, 0)
		for len(msg) == 0 {
			ev, err := rd.Next()
			if err != nil {
				return fmt.Errorf("reading SSE: %w", err)
			}
			msg = ev.Data
		}
	} else if msg, err = io.ReadAll(resp.Body); err != nil {
		return err
	}
	var r struct {
		ID     json.RawMessage `json:"id"`
		Result struct {
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(msg, &r); err != nil {
		return fmt.Errorf("reply: %v: %.200s", err, msg)
	}
	if !bytes.Equal(r.ID, []byte(id)) {
		return fmt.Errorf("reply id %s, want %s", r.ID, id)
	}
	if len(r.Result.Content) != 1 || r.Result.Content[0].Text != text {
		got := ""
		if len(r.Result.Content) > 0 {
			got = r.Result.Content[0].Text
		}
		return fmt.Errorf("reply text of %d bytes (%.40q...), want %d (%.40q...)", len(got), got, len(text), text)
	}
	return nil
}
