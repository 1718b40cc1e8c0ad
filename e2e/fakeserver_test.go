package e2e

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// pagedServer is a small stdio MCP server of the session eras that this test binary becomes
// when the gateway runs it with $E2E_PAGED_SERVER set (see pagedEntry): it lists its tools,
// prompts and resources PageSize at a time with opaque cursors (refusing any other cursor),
// and answers each call with its own name, the original tool name and the message argument,
// so a test sees exactly which server and which tool a call reached; its tool "calls" reports
// the calls it received. It exists for the aggregation tests (pagination, members held down,
// filters, shortened names): it pages every list, not only tools, and refuses any cursor it did
// not give, so a gateway that passed its own composite cursor on, or lost a member's cursor,
// is caught.
type pagedServer struct {
	Name      string   `json:"name"`      // reported in serverInfo and in every result
	Tools     []string `json:"tools"`     // tool names, listed in this order; "calls" lists the calls so far
	Prompts   []string `json:"prompts"`   // prompt names (none: no prompts capability)
	Resources []string `json:"resources"` // resource URIs (none: no resources capability)
	PageSize  int      `json:"pageSize"`  // items per page; 0: one page
	// DownFile, if set, holds the server down: while the file exists the server exits with
	// status 1 at start (after a line on stderr), so every restart the gateway tries fails.
	DownFile string `json:"downFile"`
}

// envPagedServer carries a pagedServer's JSON to the re-executed test binary.
const envPagedServer = "E2E_PAGED_SERVER"

// pagedMarkerFlag carries the marker in argv, where testkit.FindProcs sees it. It is a flag, so
// that a test binary started without $E2E_PAGED_SERVER fails loudly instead of running tests.
const pagedMarkerFlag = "-e2e.paged="

func init() {
	v, ok := os.LookupEnv(envPagedServer)
	if !ok {
		return
	}
	var s pagedServer
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		fmt.Fprintf(os.Stderr, "paged server: bad $%s: %v\n", envPagedServer, err)
		os.Exit(2)
	}
	os.Exit(s.run())
}

// pagedEntry is a config entry ("mcpServers" value) running this test binary as s, with marker
// in its argv, and extra keys (prefix, tools, timeout...) added.
func pagedEntry(s pagedServer, marker string, extra map[string]any) map[string]any {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	spec, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	e := map[string]any{
		"command": exe,
		"args":    []string{pagedMarkerFlag + marker},
		// A -race binary sleeps 1s in os.Exit by default; the gateway would wait for it.
		"env": map[string]string{envPagedServer: string(spec), "GORACE": "atexit_sleep_ms=0"},
	}
	for k, v := range extra {
		e[k] = v
	}
	return e
}

type pagedMsg struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  any             `json:"result,omitempty"`
	Error   *pagedErr       `json:"error,omitempty"`
}

type pagedErr struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (s *pagedServer) run() int {
	if s.DownFile != "" {
		if _, err := os.Stat(s.DownFile); err == nil {
			fmt.Fprintf(os.Stderr, "paged server %s: held down by %s\n", s.Name, s.DownFile)
			return 1
		}
	}
	var (
		wmu   sync.Mutex
		calls []string
	)
	out := bufio.NewWriter(os.Stdout)
	write := func(m pagedMsg) {
		m.JSONRPC = "2.0"
		b, err := json.Marshal(m)
		if err != nil {
			panic(err)
		}
		wmu.Lock()
		defer wmu.Unlock()
		out.Write(append(b, '\n'))
		if out.Flush() != nil {
			os.Exit(1)
		}
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 16<<20)
	for in.Scan() {
		var m pagedMsg
		if err := json.Unmarshal(in.Bytes(), &m); err != nil {
			write(pagedMsg{ID: json.RawMessage("null"), Error: &pagedErr{-32700, "parse error"}})
			continue
		}
		if m.Method == "" || len(m.ID) == 0 {
			continue // a notification or a reply: nothing to do
		}
		result, perr := s.handle(m, &calls)
		if perr != nil {
			write(pagedMsg{ID: m.ID, Error: perr})
		} else {
			write(pagedMsg{ID: m.ID, Result: result})
		}
	}
	return 0
}

func (s *pagedServer) handle(m pagedMsg, calls *[]string) (any, *pagedErr) {
	var p struct {
		ProtocolVersion string         `json:"protocolVersion"`
		Cursor          *string        `json:"cursor"`
		Name            string         `json:"name"`
		URI             string         `json:"uri"`
		Arguments       map[string]any `json:"arguments"`
	}
	if len(m.Params) > 0 {
		if err := json.Unmarshal(m.Params, &p); err != nil {
			return nil, &pagedErr{-32602, "invalid params: " + err.Error()}
		}
	}
	switch m.Method {
	case "initialize":
		version := "2025-11-25"
		if slices.Contains([]string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}, p.ProtocolVersion) {
			version = p.ProtocolVersion
		}
		caps := map[string]any{"tools": map[string]any{"listChanged": true}}
		if len(s.Prompts) > 0 {
			caps["prompts"] = map[string]any{"listChanged": true}
		}
		if len(s.Resources) > 0 {
			caps["resources"] = map[string]any{"listChanged": true}
		}
		return map[string]any{
			"protocolVersion": version,
			"capabilities":    caps,
			"serverInfo":      map[string]any{"name": "e2e-paged-" + s.Name, "version": "1.0.0"},
		}, nil
	case "ping":
		return map[string]any{}, nil
	case "tools/list":
		return s.page("tools", p.Cursor, s.Tools, func(name string) any {
			return map[string]any{
				"name":        name,
				"description": fmt.Sprintf("Tool %s of %s", name, s.Name),
				"inputSchema": map[string]any{"type": "object", "properties": map[string]any{"message": map[string]any{"type": "string"}}},
			}
		})
	case "prompts/list":
		return s.page("prompts", p.Cursor, s.Prompts, func(name string) any {
			return map[string]any{"name": name, "description": fmt.Sprintf("Prompt %s of %s", name, s.Name)}
		})
	case "resources/list":
		return s.page("resources", p.Cursor, s.Resources, func(uri string) any {
			return map[string]any{"uri": uri, "name": uri, "mimeType": "text/plain"}
		})
	case "resources/templates/list":
		if len(s.Resources) == 0 {
			break
		}
		return map[string]any{"resourceTemplates": []any{}}, nil
	case "tools/call":
		if !slices.Contains(s.Tools, p.Name) {
			return nil, &pagedErr{-32602, "unknown tool: " + p.Name}
		}
		text := ""
		if p.Name == "calls" {
			b, _ := json.Marshal(*calls)
			text = string(b)
		} else {
			*calls = append(*calls, p.Name)
			msg, _ := p.Arguments["message"].(string)
			text = fmt.Sprintf("%s/%s: %s", s.Name, p.Name, msg)
		}
		return map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}}, nil
	case "prompts/get":
		if !slices.Contains(s.Prompts, p.Name) {
			return nil, &pagedErr{-32602, "unknown prompt: " + p.Name}
		}
		return map[string]any{"messages": []any{map[string]any{
			"role": "user", "content": map[string]any{"type": "text", "text": s.Name + "/" + p.Name},
		}}}, nil
	case "resources/read":
		if !slices.Contains(s.Resources, p.URI) {
			return nil, &pagedErr{-32002, "resource not found: " + p.URI}
		}
		return map[string]any{"contents": []any{map[string]any{"uri": p.URI, "mimeType": "text/plain", "text": s.Name + " " + p.URI}}}, nil
	}
	return nil, &pagedErr{-32601, "method not found: " + m.Method}
}

// page returns one page of items of kind after cursor. A cursor is the server's name, the kind
// and an offset, base64-encoded; anything else is an invalid cursor (-32602), as a composite
// cursor of the gateway's passed on unchanged would be.
func (s *pagedServer) page(kind string, cursor *string, items []string, item func(string) any) (any, *pagedErr) {
	if len(items) == 0 && kind != "tools" {
		return nil, &pagedErr{-32601, "method not found: " + kind + "/list"}
	}
	start := 0
	if cursor != nil {
		b, err := base64.RawURLEncoding.DecodeString(*cursor)
		parts := strings.Split(string(b), "|")
		n := -1
		if err == nil && len(parts) == 3 && parts[0] == s.Name && parts[1] == kind {
			n, err = strconv.Atoi(parts[2])
		}
		if err != nil || n <= 0 || n >= len(items) {
			return nil, &pagedErr{-32602, fmt.Sprintf("invalid cursor %q for %s of %s", *cursor, kind, s.Name)}
		}
		start = n
	}
	end := len(items)
	if s.PageSize > 0 {
		end = min(start+s.PageSize, len(items))
	}
	list := []any{}
	for _, it := range items[start:end] {
		list = append(list, item(it))
	}
	res := map[string]any{kind: list}
	if end < len(items) {
		res["nextCursor"] = base64.RawURLEncoding.EncodeToString([]byte(s.Name + "|" + kind + "|" + strconv.Itoa(end)))
	}
	return res, nil
}
