package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The aggregation tests: one endpoint (gateway.endpoints.NAME, at /endpoints/NAME/mcp and
// /sse; the default endpoint "all" of every server at /mcp) merging several servers, their
// tools and prompts exposed as PREFIX__NAME (the prefix is the server's name unless "prefix"
// says otherwise), resources under their own URIs.

const (
	eraSession = "2025-11-25" // initialize, a session
	eraModern  = "2026-07-28" // server/discover, self-contained requests, subscriptions/listen
)

// aggregateEras: every aggregation behaviour is checked in both eras, with the official Go SDK
// client negotiating each.
var aggregateEras = []string{eraSession, eraModern}

const aggregateClientScript = "aggregate_client.mjs"

// aggregateSummary is what aggregate_client.mjs prints.
type aggregateSummary struct {
	OK        bool   `json:"ok"`
	Transport string `json:"transport"`
	Members   map[string]struct {
		Tools     []string `json:"tools"`
		Prompts   []string `json:"prompts"`
		Resources []string `json:"resources"`
	} `json:"members"`
	Endpoint struct {
		Tools        []string       `json:"tools"`
		Prompts      []string       `json:"prompts"`
		Resources    []string       `json:"resources"`
		Capabilities map[string]any `json:"capabilities"`
		ServerInfo   map[string]any `json:"serverInfo"`
		Requests     map[string]int `json:"requests"` // with --one-page: list requests per method
	} `json:"endpoint"`
	Calls  map[string]json.RawMessage `json:"calls"`
	Errors []string                   `json:"errors"`
}

// TestAggregateTypeScriptClient: the reference servers server-memory, server-everything and
// server-sequential-thinking (stdio, on Node 22) behind one endpoint. The official TypeScript
// SDK client lists each server directly (/servers/NAME/mcp) and the endpoint, which must list
// exactly every member's tools and prompts as NAME__TOOL (description and schemas unchanged)
// and every resource under its own URI, then calls tools of each member through the endpoint
// (memory: create_entities then open_nodes, read back directly too; everything: echo, get-sum,
// a prompt and a resource; sequential-thinking: one thought) and checks the results. Over
// Streamable HTTP and the legacy SSE transport of the endpoint, and through the default
// endpoint at /mcp and /sse. The endpoint's lists are read as Claude.ai, Claude Code, Codex and
// Copilot CLI read them: one listTools() call (and one of each other list), whose one page must
// hold every member's tools. Then the Go SDK client does the same in the 2026-07-28 era.
func TestAggregateTypeScriptClient(t *testing.T) {
	requirePeers(t, node22, serverEverything, serverMemory, serverThinking)
	script := installScript(t, aggregateClientScript)
	memoryFile := filepath.Join(t.TempDir(), "memory.jsonl")
	members := []string{"memory", "everything", "thinking"}
	base := startGateway(t, map[string]any{
		"mcpServers": map[string]any{
			"memory":     map[string]any{"command": node22, "args": []string{serverMemory}, "env": map[string]string{"MEMORY_FILE_PATH": memoryFile}},
			"everything": map[string]any{"command": node22, "args": []string{serverEverything, "stdio"}},
			"thinking":   map[string]any{"command": node22, "args": []string{serverThinking}},
		},
		"gateway": map[string]any{"endpoints": map[string]any{
			"trio": map[string]any{"servers": members},
		}},
	})
	var memberArgs []string
	for _, m := range members {
		memberArgs = append(memberArgs, "--member", m+"="+base+"/servers/"+m+"/mcp")
	}
	// The gateway listens before its servers are up; the endpoint shows each member once it
	// is (telling its clients with list_changed). The script lists once, so wait for that
	// first, as a client would: until the endpoint lists every member's tools.
	{
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		var want []string
		for _, m := range members {
			d := connectSDK(t, ctx, base+"/servers/"+m+"/mcp", eraSession)
			names, _ := listTools(t, ctx, d.cs)
			for _, n := range names {
				want = append(want, m+"__"+n)
			}
			d.cs.Close()
		}
		c := connectSDK(t, ctx, base+"/endpoints/trio/mcp", eraSession)
		waitTools(t, ctx, c, "the members up", hasAll(want))
		c.cs.Close()
		cancel()
	}

	for _, tc := range []struct{ name, path, transport string }{
		{"mcp", "/endpoints/trio/mcp", "streamable"},
		{"sse", "/endpoints/trio/sse", "sse"},
		{"default-endpoint", "/mcp", "streamable"},
		{"default-endpoint-sse", "/sse", "sse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{script, "--url", base + tc.path, "--transport", tc.transport, "--one-page"}, memberArgs...)
			out, err := runNode(t, peersDir, 2*time.Minute, args...)
			var sum aggregateSummary
			if jerr := json.Unmarshal([]byte(strings.TrimSpace(out)), &sum); jerr != nil {
				t.Fatalf("client script (exit: %v) printed no JSON summary: %v\n%s", err, jerr, out)
			}
			for _, e := range sum.Errors {
				t.Errorf("aggregate client: %s", e)
			}
			if err != nil || !sum.OK {
				t.Fatalf("aggregate client: exit %v, ok=%v", err, sum.OK)
			}
			// The script checks these itself; checking again here keeps a weakened script from
			// passing.
			var want []string
			for _, m := range members {
				ms, ok := sum.Members[m]
				if !ok || len(ms.Tools) == 0 {
					t.Fatalf("the script listed no tools of %s directly: %+v", m, sum.Members)
				}
				for _, tool := range ms.Tools {
					want = append(want, m+"__"+tool)
				}
			}
			if d := setDiff(want, sum.Endpoint.Tools); d != "" {
				t.Errorf("endpoint tools vs the members' own, prefixed: %s", d)
			}
			if n := sum.Endpoint.Requests["listTools"]; n != 1 {
				t.Errorf("the script read the endpoint's tools with %d listTools calls, want one", n)
			}
			for _, name := range []string{"memory__create_entities", "everything__echo", "everything__get-sum", "thinking__sequentialthinking"} {
				if _, ok := sum.Calls[name]; !ok {
					t.Errorf("the script did not call %s (calls: %v)", name, slices.Sorted(maps.Keys(sum.Calls)))
				}
			}
			// The entity the script created through the endpoint is in server-memory's file.
			var entity string
			_ = json.Unmarshal(sum.Calls["memoryEntity"], &entity)
			if data, err := os.ReadFile(memoryFile); entity == "" || err != nil || !strings.Contains(string(data), entity) {
				t.Errorf("server-memory's file %s does not hold the entity %q created through the endpoint (%v)", memoryFile, entity, err)
			}
			for k, v := range sum.Calls {
				if strings.HasPrefix(k, "unprefixed ") {
					t.Logf("%s: %s", k, v)
				}
			}
			t.Logf("%s: %d tools, %d prompts, %d resources of %d servers through %s (%s); serverInfo %v",
				tc.name, len(sum.Endpoint.Tools), len(sum.Endpoint.Prompts), len(sum.Endpoint.Resources), len(members), tc.path, tc.transport, sum.Endpoint.ServerInfo)
		})
	}

	// The 2026-07-28 era, with the Go SDK client: the members are servers of the session eras,
	// so the gateway translates. What server-everything lists depends on the capabilities the
	// client declares, so the members are listed directly by the same client, in the same era.
	t.Run("modern", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var want []string
		for _, m := range members {
			c := connectSDK(t, ctx, base+"/servers/"+m+"/mcp", eraModern)
			names, _ := listTools(t, ctx, c.cs)
			if len(names) == 0 {
				t.Fatalf("%s lists no tools in %s", m, eraModern)
			}
			for _, n := range names {
				want = append(want, m+"__"+n)
			}
		}
		c := connectSDK(t, ctx, base+"/endpoints/trio/mcp", eraModern)
		got := waitTools(t, ctx, c, "the members up", hasAll(want))
		if d := setDiff(want, got); d != "" {
			t.Errorf("endpoint tools in %s vs the members' own, prefixed: %s", eraModern, d)
		}
		msg := fmt.Sprintf("modern-%d", time.Now().UnixNano())
		if text := mustCall(t, ctx, c.cs, "everything__echo", map[string]any{"message": msg}); text != "Echo: "+msg {
			t.Errorf("everything__echo: %q", text)
		}
		entity := "modern-entity-" + msg
		mustCall(t, ctx, c.cs, "memory__create_entities", map[string]any{"entities": []any{map[string]any{"name": entity, "entityType": "e2e", "observations": []string{"modern"}}}})
		if text := mustCall(t, ctx, c.cs, "memory__open_nodes", map[string]any{"names": []string{entity}}); !strings.Contains(text, entity) {
			t.Errorf("memory__open_nodes: %q", text)
		}
		text := mustCall(t, ctx, c.cs, "thinking__sequentialthinking", map[string]any{"thought": "modern", "thoughtNumber": 1, "totalThoughts": 1, "nextThoughtNeeded": false})
		var thought struct {
			ThoughtNumber, TotalThoughts int
			NextThoughtNeeded            bool
		}
		if err := json.Unmarshal([]byte(text), &thought); err != nil || thought.ThoughtNumber != 1 || thought.TotalThoughts != 1 || thought.NextThoughtNeeded {
			t.Errorf("thinking__sequentialthinking: %q (%v)", text, err)
		}
		t.Logf("%s: %d tools of %d servers; one call of each member", eraModern, len(got), len(members))
	})
}

// TestAggregatePagination: two members that list their tools, prompts and resources 3 at a
// time, with cursors of their own that they check. The endpoint's lists hold every item of every
// page of both members exactly once (tools and prompts prefixed, resources as they are), in the
// same order every time: in one page (the default, for clients that read one), and in pages of
// "pageSize" 4 through an endpoint that sets it, followed with its cursors; a tool, a prompt and
// a resource from a member's last page route back to it; a cursor the endpoint never gave is
// refused with -32602. In both eras.
func TestAggregatePagination(t *testing.T) {
	seq := func(prefix string, n int) []string {
		var s []string
		for i := range n {
			s = append(s, fmt.Sprintf("%s%02d", prefix, i))
		}
		return s
	}
	uris := func(server string, n int) []string {
		var s []string
		for i := range n {
			s = append(s, fmt.Sprintf("paged://%s/r%02d", server, i))
		}
		return s
	}
	p1 := pagedServer{Name: "p1", Tools: seq("t", 8), Prompts: seq("pr", 5), Resources: uris("p1", 4), PageSize: 3}
	p2 := pagedServer{Name: "p2", Tools: seq("u", 7), Prompts: seq("qr", 4), Resources: uris("p2", 7), PageSize: 3}
	mark := fmt.Sprintf("e2e-agg-paged-%d", time.Now().UnixNano())
	base := startGateway(t, map[string]any{
		"mcpServers": map[string]any{"p1": pagedEntry(p1, mark, nil), "p2": pagedEntry(p2, mark, nil)},
		"gateway": map[string]any{"endpoints": map[string]any{
			"paged": map[string]any{"servers": []string{"p1", "p2"}},
			"sized": map[string]any{"servers": []string{"p1", "p2"}, "pageSize": 4},
		}},
	})
	var wantTools, wantPrompts, wantResources []string
	for _, s := range []pagedServer{p1, p2} {
		for _, n := range s.Tools {
			wantTools = append(wantTools, s.Name+"__"+n)
		}
		for _, n := range s.Prompts {
			wantPrompts = append(wantPrompts, s.Name+"__"+n)
		}
		wantResources = append(wantResources, s.Resources...)
	}

	for _, era := range aggregateEras {
		t.Run(era, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			// The members do page: directly, a first page of 3 and a cursor.
			direct := connectSDK(t, ctx, base+"/servers/p1/mcp", era)
			first, err := direct.cs.ListTools(ctx, &mcp.ListToolsParams{})
			if err != nil || len(first.Tools) != 3 || first.NextCursor == "" {
				t.Fatalf("p1 directly: first page %+v (%v), want 3 tools and a cursor", first, err)
			}

			c := connectSDK(t, ctx, base+"/endpoints/paged/mcp", era)
			waitTools(t, ctx, c, "the members up", hasAll(wantTools))
			// One page: what a client that reads one page sees.
			if first, err := c.cs.ListTools(ctx, &mcp.ListToolsParams{}); err != nil || first.NextCursor != "" || len(first.Tools) != len(wantTools) {
				t.Errorf("tools/list, first page: %d tools, nextCursor %q (%v), want all %d in one page", len(first.Tools), first.NextCursor, err, len(wantTools))
			}
			// Pages of 4, through the endpoint with pageSize 4.
			sized := connectSDK(t, ctx, base+"/endpoints/sized/mcp", era)
			waitTools(t, ctx, sized, "the members up", hasAll(wantTools))
			if tools, _, pages := listToolPages(t, ctx, sized.cs); pages != (len(wantTools)+3)/4 {
				t.Errorf("pageSize 4: %d tools in %d pages, want %d pages", len(tools), pages, (len(wantTools)+3)/4)
			} else if d := setDiff(wantTools, tools); d != "" {
				t.Errorf("pageSize 4: %s", d)
			}
			// The order is the gateway's to choose, but it must not change between listings.
			diff := setDiff
			wantTools, wantPrompts, wantResources := wantTools, wantPrompts, wantResources
			for round := range 2 {
				tools, _, pages := listToolPages(t, ctx, c.cs)
				if d := diff(wantTools, tools); d != "" {
					t.Errorf("round %d: tools/list (%d pages): %s", round, pages, d)
				}
				prompts := listPrompts(t, ctx, c.cs)
				if d := diff(wantPrompts, prompts); d != "" {
					t.Errorf("round %d: prompts/list: %s", round, d)
				}
				resources := listResources(t, ctx, c.cs)
				if d := diff(wantResources, resources); d != "" {
					t.Errorf("round %d: resources/list: %s", round, d)
				}
				t.Logf("round %d: %d tools in %d pages, %d prompts, %d resources", round, len(tools), pages, len(prompts), len(resources))
				wantTools, wantPrompts, wantResources = tools, prompts, resources
				diff = seqDiff
			}
			for _, tc := range []struct{ tool, want string }{{"p1__t07", "p1/t07: last"}, {"p2__u06", "p2/u06: last"}, {"p2__u00", "p2/u00: last"}} {
				if got := mustCall(t, ctx, c.cs, tc.tool, map[string]any{"message": "last"}); got != tc.want {
					t.Errorf("%s: %q, want %q", tc.tool, got, tc.want)
				}
			}
			pr, err := c.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "p1__pr04"})
			if err != nil || len(pr.Messages) != 1 || textContent(pr.Messages[0].Content) != "p1/pr04" {
				t.Errorf("prompts/get p1__pr04: %+v, %v", pr, err)
			}
			rr, err := c.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "paged://p2/r06"})
			if err != nil || len(rr.Contents) != 1 || rr.Contents[0].Text != "p2 paged://p2/r06" {
				t.Errorf("resources/read paged://p2/r06: %+v, %v", rr, err)
			}
			_, err = c.cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: "not-a-cursor-of-the-gateway"})
			var werr *jsonrpc.Error
			if !errors.As(err, &werr) || werr.Code != jsonrpc.CodeInvalidParams {
				t.Errorf("tools/list with a cursor the gateway never gave: %v, want a -32602 error", err)
			}
		})
	}
}

// TestAggregateMemberDown: an endpoint of two servers; one of them ("flaky") is killed and
// held down (every restart exits at once while a file exists). A client of each era and one
// that connects while it is down: each gets notifications/tools/list_changed, its next
// tools/list holds only the other server's tools, the other server keeps answering, and a call
// to a tool of the one down fails at once (not after the request timeout) naming it. Once the
// file is gone the gateway's restart succeeds: list_changed again, the tools are back and
// answer.
func TestAggregateMemberDown(t *testing.T) {
	mark := fmt.Sprintf("e2e-agg-down-%d", time.Now().UnixNano())
	downFile := filepath.Join(t.TempDir(), "flaky.down")
	steady := pagedServer{Name: "steady", Tools: []string{"echo"}}
	flaky := pagedServer{Name: "flaky", Tools: []string{"echo", "other"}, DownFile: downFile}
	const requestTimeout = 60 * time.Second
	base := startGateway(t, map[string]any{
		"mcpServers": map[string]any{
			"steady": pagedEntry(steady, mark+"-steady", map[string]any{"timeout": requestTimeout.String()}),
			"flaky":  pagedEntry(flaky, mark+"-flaky", map[string]any{"timeout": requestTimeout.String()}),
		},
		"gateway": map[string]any{"endpoints": map[string]any{"pair": map[string]any{"servers": []string{"steady", "flaky"}}}},
	})
	url := base + "/endpoints/pair/mcp"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	all := []string{"flaky__echo", "flaky__other", "steady__echo"}
	without := []string{"steady__echo"}

	clients := map[string]*sdkClient{}
	for _, era := range aggregateEras {
		c := connectSDK(t, ctx, url, era)
		if got := waitTools(t, ctx, c, era+": before the kill", hasAll(all)); setDiff(all, got) != "" {
			t.Fatalf("%s: before the kill: %s", era, setDiff(all, got))
		}
		mustCall(t, ctx, c.cs, "flaky__echo", map[string]any{"message": "up"})
		clients[era] = c
	}
	for _, c := range clients {
		c.drain()
	}

	// Down: the file first, so that no restart can succeed, then every process of the server.
	if err := os.WriteFile(downFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	procs := testkit.Procs(mark + "-flaky")
	if len(procs) == 0 {
		t.Fatal("no process of flaky found")
	}
	for _, pid := range procs {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			t.Fatalf("kill %d: %v", pid, err)
		}
	}
	t.Logf("killed flaky's processes %v and held it down with %s", procs, downFile)

	checkDown := func(t *testing.T, era string, c *sdkClient) {
		if got, _ := listTools(t, ctx, c.cs); setDiff(without, got) != "" {
			t.Errorf("%s: tools/list while flaky is down: %s", era, setDiff(without, got))
		}
		if got := mustCall(t, ctx, c.cs, "steady__echo", map[string]any{"message": "still here"}); got != "steady/echo: still here" {
			t.Errorf("%s: steady__echo while flaky is down: %q", era, got)
		}
		start := time.Now()
		o := callOutcome(t, ctx, c.cs, "flaky__echo", map[string]any{"message": "down"})
		took := time.Since(start)
		// Naming the server, not just echoing the tool's name back.
		if !o.failed() || !strings.Contains(strings.ReplaceAll(o.message(), "flaky__echo", ""), "flaky") {
			t.Errorf("%s: flaky__echo while flaky is down: %s, want an error naming the server flaky", era, o)
		}
		// An error that waited for flaky would come with the request timeout.
		if took >= requestTimeout {
			t.Errorf("%s: flaky__echo while flaky is down took %v, want an immediate error (the request timeout is %v)", era, took, requestTimeout)
		}
		t.Logf("%s: flaky__echo while down: %s (%v)", era, o, took.Round(time.Millisecond))
	}
	for _, era := range aggregateEras {
		c := clients[era]
		if !c.waitToolsChanged(30 * time.Second) {
			t.Fatalf("%s: no notifications/tools/list_changed within 30s of flaky's kill", era)
		}
		checkDown(t, era, c)
	}
	// A client arriving while a member is down gets the others.
	late := connectSDK(t, ctx, url, eraSession)
	checkDown(t, "late "+eraSession, late)
	clients["late"] = late
	for _, c := range clients {
		c.drain()
	}

	// Back up.
	if err := os.Remove(downFile); err != nil {
		t.Fatal(err)
	}
	for name, c := range clients {
		if !c.waitToolsChanged(60 * time.Second) {
			t.Fatalf("%s: no notifications/tools/list_changed within 60s of flaky's return", name)
		}
		if got, _ := listTools(t, ctx, c.cs); setDiff(all, got) != "" {
			t.Errorf("%s: tools/list once flaky is back: %s", name, setDiff(all, got))
		}
		if got := mustCall(t, ctx, c.cs, "flaky__echo", map[string]any{"message": "back"}); got != "flaky/echo: back" {
			t.Errorf("%s: flaky__echo once back: %q", name, got)
		}
		if got := mustCall(t, ctx, c.cs, "steady__echo", map[string]any{"message": "still"}); got != "steady/echo: still" {
			t.Errorf("%s: steady__echo once flaky is back: %q", name, got)
		}
	}
}
