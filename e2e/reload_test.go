package e2e

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const reloadClientScript = "reload_client.mjs"

// reloadSummary is what reload_client.mjs prints.
type reloadSummary struct {
	OK       bool     `json:"ok"`
	Sessions []string `json:"sessions"`
	Steps    []struct {
		Step  int                        `json:"step"`
		Tools []string                   `json:"tools"`
		Calls map[string]json.RawMessage `json:"calls"`
	} `json:"steps"`
	Errors []string `json:"errors"`
}

// TestReloadKeepsSessionTypeScriptClient: the official TypeScript SDK client, which does not
// initialize again after a 404, keeps one session of the default endpoint (/mcp) across two
// reloads of the gateway's config file (its file watch): the first adds server-memory, and the
// client hears tools/list_changed, lists memory's tools and calls one; the second removes it,
// and the client hears list_changed again, its call of memory's tool is an error naming the
// removal, and server-everything's echo still answers. The session id is the same throughout.
func TestReloadKeepsSessionTypeScriptClient(t *testing.T) {
	requirePeers(t, node22, serverEverything, serverMemory)
	script := installScript(t, reloadClientScript)
	dir := t.TempDir()
	everything := map[string]any{"command": node22, "args": []string{serverEverything, "stdio"}}
	memory := map[string]any{"command": node22, "args": []string{serverMemory},
		"env": map[string]string{"MEMORY_FILE_PATH": filepath.Join(dir, "memory.jsonl")}}
	path := writeGatewayConfig(t, map[string]any{"mcpServers": map[string]any{"everything": everything}})
	added := writeGatewayConfig(t, map[string]any{"mcpServers": map[string]any{"everything": everything, "memory": memory}})
	removed := writeGatewayConfig(t, map[string]any{"mcpServers": map[string]any{"everything": everything}})
	base := startGatewayFile(t, path, "127.0.0.1:0")

	// The gateway listens before its servers are up: wait until /mcp lists everything's tools,
	// as a client would.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	c := connectSDK(t, ctx, base+"/mcp", eraSession)
	waitTools(t, ctx, c, "everything up", hasAll([]string{"everything__echo"}))
	c.cs.Close()
	cancel()

	const removedText = `server "memory" was removed from endpoint "all" by a config reload`
	out, err := runNode(t, peersDir, 3*time.Minute, script,
		"--url", base+"/mcp", "--config", path, "--step", added, "--step", removed,
		"--expect", "1:+memory__read_graph", "--expect", "1:=everything__echo",
		"--expect", "2:-memory__read_graph", "--expect", "2:=everything__echo",
		"--args", `everything__echo={"message":"across reloads"}`,
		"--removed-text", "2:"+removedText)
	var sum reloadSummary
	if jerr := json.Unmarshal([]byte(strings.TrimSpace(out)), &sum); jerr != nil {
		t.Fatalf("reload client (exit: %v) printed no JSON summary: %v\n%s", err, jerr, out)
	}
	for _, e := range sum.Errors {
		t.Errorf("reload client: %s", e)
	}
	if err != nil || !sum.OK {
		t.Fatalf("reload client: exit %v, ok=%v", err, sum.OK)
	}
	// The script checks these itself; checking again here keeps a weakened script from passing.
	if len(sum.Sessions) != 3 || sum.Sessions[0] == "" || sum.Sessions[1] != sum.Sessions[0] || sum.Sessions[2] != sum.Sessions[0] {
		t.Errorf("session ids before and after the reloads: %q, want one", sum.Sessions)
	}
	if len(sum.Steps) != 3 {
		t.Fatalf("%d steps reported, want 3", len(sum.Steps))
	}
	if tools := sum.Steps[1].Tools; !slices.Contains(tools, "memory__read_graph") || !slices.Contains(tools, "everything__echo") {
		t.Errorf("tools after memory was added: %v", tools)
	}
	if tools := sum.Steps[2].Tools; slices.Contains(tools, "memory__read_graph") || !slices.Contains(tools, "everything__echo") {
		t.Errorf("tools after memory was removed: %v", tools)
	}
	var gone struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(sum.Steps[2].Calls["memory__read_graph"], &gone); err != nil || !strings.Contains(gone.Error, removedText) {
		t.Errorf("the removed member's call: %s, want an error containing %q", sum.Steps[2].Calls["memory__read_graph"], removedText)
	}
	t.Logf("session %s kept across 2 reloads; calls %s / %s", sum.Sessions[0], sum.Steps[1].Calls, sum.Steps[2].Calls)
}
