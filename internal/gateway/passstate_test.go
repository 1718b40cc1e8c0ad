package gateway

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// The requestState of a server speaking 2026-07-28 itself is bound to the
// principal it was given to: the client gets it sealed, another principal
// retrying with it is refused without reaching the server, an altered one
// too, and its own retry gives the server its state back as it wrote it.
func TestPassthroughStateBoundToPrincipal(t *testing.T) {
	srv := fakeServer("m", testkit.FakeOptions{Modern: true})
	srv.Protocol = config.ProtocolModern
	cfg := newConfig(srv)
	cfg.Gateway.Auth = config.NewAuth()
	for _, name := range []string{"alice", "bob"} {
		sum := sha256.Sum256([]byte("key-of-" + name))
		cfg.Gateway.Auth.APIKeys = append(cfg.Gateway.Auth.APIKeys, config.APIKey{Name: name, SHA256: hex.EncodeToString(sum[:])})
	}
	g := startGateway(t, cfg)
	call := func(who, state string) (int, rpc) {
		t.Helper()
		return mrtrStateCall(t, g, who, state)
	}
	status, m := call("alice", "")
	var res struct {
		ResultType   string          `json:"resultType"`
		RequestState json.RawMessage `json:"requestState"`
	}
	if err := json.Unmarshal(m.Result, &res); status != http.StatusOK || err != nil || res.ResultType != "input_required" {
		t.Fatalf("first call: %d %+v", status, m)
	}
	if strings.Contains(string(res.RequestState), "srv:") {
		t.Fatalf("the server's state reached the client unsealed: %s", res.RequestState)
	}
	if status, m := call("bob", string(res.RequestState)); status != http.StatusBadRequest || m.Error == nil || m.Error.Code != -32602 {
		t.Errorf("bob retrying alice's state: %d %+v, want 400 -32602", status, m)
	}
	altered := []byte(string(res.RequestState))
	altered[10] ^= 'A' ^ 'B' // still base64url, another byte sealed
	if status, m := call("alice", string(altered)); status != http.StatusBadRequest || m.Error == nil {
		t.Errorf("an altered state: %d %+v, want 400", status, m)
	}
	if status, m := call("alice", `"srv:x1"`); status != http.StatusBadRequest || m.Error == nil {
		t.Errorf("the server's own state, unsealed: %d %+v, want 400", status, m)
	}
	if status, m := call("alice", string(res.RequestState)); status != http.StatusOK || toolText(t, m) != "state srv:x1" {
		t.Errorf("alice's retry: %d %+v, want the server's own state back", status, m)
	}
}

// mrtrStateCall calls server m's mrtr_state tool (2026-07-28, passthrough)
// as principal who (API key "key-of-"+who), retrying with state (a JSON
// string) if set, and returns the HTTP status and the reply.
func mrtrStateCall(t *testing.T, g *testGateway, who, state string) (int, rpc) {
	t.Helper()
	params := `{"name":"mrtr_state","arguments":{"message":"x1"},` + gwAtkMeta + `}`
	if state != "" {
		params = `{"name":"mrtr_state","arguments":{"message":"x1"},"requestState":` + state + `,"inputResponses":{"q":{"action":"accept","content":{}}},` + gwAtkMeta + `}}`
	} else {
		params += `}`
	}
	req := modernRequest(t.Context(), g, "m", "tools/call", `{"jsonrpc":"2.0","id":"c","method":"tools/call","params":`+params+`}`)
	req.Header.Set("Mcp-Name", "mrtr_state")
	req.Header.Set("Authorization", "Bearer key-of-"+who)
	resp, err := g.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.Header.Get("Content-Type") == "text/event-stream" {
		lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
		raw = []byte(strings.TrimPrefix(lines[len(lines)-1], "data: "))
	}
	return resp.StatusCode, decode(t, raw)
}
