package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mcpgate/mcpgate/internal/sse"
)

// The calls of the modern crossfire (modern_crossfire_test.go): their bodies,
// streams and checks, and the tally of what crossed.

// crossCall is the id and token of client c's call i.
func crossCall(c, i int) (id, token string) {
	return crossIDs[(c+i)%len(crossIDs)], crossTokens[(c*3+i)%len(crossTokens)]
}

// wantProgress is how many progress notifications echo sends.
func wantProgress(token string) int {
	if token == "" {
		return 0
	}
	return 3
}

// crossMeta is the _meta of a 2026-07-28 request, with a progress token
// unless token is "".
func crossMeta(token string) string {
	m := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
	if token != "" {
		m += `,"progressToken":` + token
	}
	return m + `}`
}

// crossPost POSTs a 2026-07-28 request (name: the tool, for Mcp-Name).
func crossPost(ctx context.Context, g *testGateway, method, name, body string) (*http.Response, error) {
	req := modernRequest(ctx, g, "s", method, body)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	return g.http.Do(req)
}

// crossToolBody is a 2026-07-28 tools/call.
func crossToolBody(id, tool string, args any, token string) string {
	a, _ := json.Marshal(args)
	return `{"jsonrpc":"2.0","id":` + id + `,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + string(a) + `,` + crossMeta(token) + `}}`
}

// readMessages returns the JSON-RPC messages of a reply: its JSON body, or
// its SSE events' data in order (the priming event, without data,
// skipped). each, if set, sees every message as it arrives; it stops the
// reading by returning false.
func readMessages(resp *http.Response, each func(json.RawMessage) bool) ([]json.RawMessage, error) {
	defer resp.Body.Close()
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(b)) == 0 {
			return nil, nil
		}
		if each != nil {
			each(b)
		}
		return []json.RawMessage{b}, nil
	}
	var msgs []json.RawMessage
	rd := sse.NewReader(resp.Body, 0)
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return msgs, nil
		}
		if err != nil {
			return msgs, err
		}
		if len(ev.Data) == 0 {
			continue
		}
		m := json.RawMessage(bytes.Clone(ev.Data))
		msgs = append(msgs, m)
		if each != nil && !each(m) {
			return msgs, nil
		}
	}
}

// crossMsg is the parts of a message the crossfire checks; raw values are
// kept as their bytes.
type crossMsg struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		ProgressToken json.RawMessage `json:"progressToken"`
		Progress      json.RawMessage `json:"progress"`
		URI           string          `json:"uri"`
		Notifications json.RawMessage `json:"notifications"`
		Meta          struct {
			Sub json.RawMessage `json:"io.modelcontextprotocol/subscriptionId"`
		} `json:"_meta"`
	} `json:"params"`
	Result *struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		Meta struct {
			Sub json.RawMessage `json:"io.modelcontextprotocol/subscriptionId"`
		} `json:"_meta"`
	} `json:"result"`
	Error json.RawMessage `json:"error"`
}

func (m *crossMsg) text() string {
	if m.Result == nil || len(m.Result.Content) == 0 {
		return ""
	}
	return m.Result.Content[0].Text
}

// checkCall checks the messages one tools/call got: progress tokened with
// its own token only (progress 1..wantProgress in order, when it asked for
// progress), then exactly one response, last, with its own id byte for
// byte and the text want, and no marker but mine in any of it. It returns
// whether another client's payload (or progress) was seen, and what is
// wrong.
func checkCall(msgs []json.RawMessage, id, token, want, mine string, wantProgress int) (crossed bool, err error) {
	progress, responses := 0, 0
	for i, raw := range msgs {
		for _, mk := range crossMarker.FindAll(raw, -1) {
			if string(mk) != mine {
				return true, fmt.Errorf("%s got %s's payload: %s", mine, mk, raw)
			}
		}
		var m crossMsg
		if err := json.Unmarshal(raw, &m); err != nil {
			return false, fmt.Errorf("%s: message %d %q: %v", mine, i, raw, err)
		}
		switch {
		case m.Method == "notifications/progress":
			progress++
			if token == "" || !bytes.Equal(m.Params.ProgressToken, []byte(token)) {
				return true, fmt.Errorf("%s (token %s) got progress for token %s: %s", mine, token, m.Params.ProgressToken, raw)
			}
			if string(m.Params.Progress) != fmt.Sprint(progress) {
				return false, fmt.Errorf("%s: progress %s, want %d: %s", mine, m.Params.Progress, progress, raw)
			}
		case m.Method != "":
			return true, fmt.Errorf("%s got a notification not for it: %s", mine, raw)
		case i != len(msgs)-1:
			return false, fmt.Errorf("%s: a response before the end (message %d of %d): %s", mine, i+1, len(msgs), raw)
		case !bytes.Equal(m.ID, []byte(id)):
			return true, fmt.Errorf("%s (id %s) got a response with id %s: %s", mine, id, m.ID, raw)
		case m.Error != nil || m.text() != want:
			return true, fmt.Errorf("%s: response %s, want the text %q", mine, raw, want)
		default:
			responses++
		}
	}
	if responses != 1 {
		return false, fmt.Errorf("%s: no response (%d messages: %q)", mine, len(msgs), msgs)
	}
	if progress != wantProgress {
		return false, fmt.Errorf("%s: %d progress notifications, want %d: %q", mine, progress, wantProgress, msgs)
	}
	return false, nil
}

// crossTally gathers the failures of concurrent clients.
type crossTally struct {
	crossed atomic.Int64
	mu      sync.Mutex
	errs    []error
}

func (x *crossTally) add(crossed bool, err error) {
	if crossed {
		x.crossed.Add(1)
	}
	if err != nil {
		x.mu.Lock()
		x.errs = append(x.errs, err)
		x.mu.Unlock()
	}
}

func (x *crossTally) report(t *testing.T) {
	t.Helper()
	x.mu.Lock()
	defer x.mu.Unlock()
	for i, err := range x.errs {
		if i == 20 {
			t.Errorf("... and %d more", len(x.errs)-i)
			break
		}
		t.Error(err)
	}
	if n := x.crossed.Load(); n != 0 {
		t.Errorf("crossed = %d, want 0", n)
	}
}

// modernEcho is one 2026-07-28 echo call of client c (its call i) with
// progress, checked.
func modernEcho(ctx context.Context, g *testGateway, x *crossTally, c, i int) {
	id, token := crossCall(c, i)
	mine := fmt.Sprintf("mc%d/%d", c, i)
	resp, err := crossPost(ctx, g, "tools/call", "echo", crossToolBody(id, "echo", map[string]string{"message": mine}, token))
	if err != nil {
		x.add(false, fmt.Errorf("%s: %v", mine, err))
		return
	}
	msgs, err := readMessages(resp, nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		x.add(false, fmt.Errorf("%s: status %d, %v, %q", mine, resp.StatusCode, err, msgs))
		return
	}
	x.add(checkCall(msgs, id, token, mine, mine, wantProgress(token)))
}

// legacyCrossClient is a session of 2025-11-25 on server s that calls echo
// calls times (ids and tokens as the modern clients have them), checking
// each reply, and deletes its session.
func legacyCrossClient(ctx context.Context, g *testGateway, x *crossTally, c, calls int) {
	url := g.URL + "/servers/s/mcp"
	post := func(session, body string) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("MCP-Protocol-Version", "2025-11-25")
		}
		return g.http.Do(req)
	}
	resp, err := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"crossfire","version":"1"}}}`)
	if err != nil {
		x.add(false, fmt.Errorf("legacy client %d: initialize: %v", c, err))
		return
	}
	session := resp.Header.Get("Mcp-Session-Id")
	msgs, err := readMessages(resp, nil)
	if err != nil || resp.StatusCode != http.StatusOK || session == "" || len(msgs) != 1 {
		x.add(false, fmt.Errorf("legacy client %d: initialize: status %d, session %q, %v, %q", c, resp.StatusCode, session, err, msgs))
		return
	}
	if resp, err := post(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil || resp.StatusCode != http.StatusAccepted {
		x.add(false, fmt.Errorf("legacy client %d: initialized: %v", c, err))
		return
	} else {
		resp.Body.Close()
	}
	for i := range calls {
		id, token := crossCall(c, i)
		mine := fmt.Sprintf("lc%d/%d", c, i)
		meta := ""
		if token != "" {
			meta = `{"progressToken":` + token + `}`
		}
		resp, err := post(session, callBody(id, "echo", map[string]string{"message": mine}, meta))
		if err != nil {
			x.add(false, fmt.Errorf("%s: %v", mine, err))
			return
		}
		msgs, err := readMessages(resp, nil)
		if err != nil || resp.StatusCode != http.StatusOK {
			x.add(false, fmt.Errorf("%s: status %d, %v, %q", mine, resp.StatusCode, err, msgs))
			return
		}
		x.add(checkCall(msgs, id, token, mine, mine, wantProgress(token)))
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, url, nil)
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	if resp, err := g.http.Do(req); err != nil {
		x.add(false, fmt.Errorf("legacy client %d: DELETE: %v", c, err))
	} else {
		resp.Body.Close()
	}
}
