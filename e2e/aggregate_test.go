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

	"github.com/mcpgate/mcpgate/internal/mcptest"
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
// endpoint at /mcp and /sse. Then the Go SDK client does the same in the 2026-07-28 era.
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
			args := append([]string{script, "--url", base + tc.path, "--transport", tc.transport}, memberArgs...)
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
// time, with cursors of their own that they check. The endpoint's lists, followed page by page
// with its cursors, hold every item of every page of both members exactly once (tools and
// prompts prefixed, resources as they are), in the same order every time; a tool, a prompt and
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
		"gateway":    map[string]any{"endpoints": map[string]any{"paged": map[string]any{"servers": []string{"p1", "p2"}}}},
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
	procs := mcptest.Procs(mark + "-flaky")
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
		if took > 10*time.Second {
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

// TestAggregateFilteredTool: server filters (fs denies secret_*, db allows query, drop_* and
// calls) and an endpoint filter (deny *drop* and *delete*, which match the same tools whether
// matched against a server's own names or the exposed ones). Filtered tools are not listed,
// and calling one by its exposed name fails exactly like calling a tool that does not exist:
// the server never sees the call (its "calls" tool says so). Through the default endpoint the
// endpoint filter does not apply, so the same tool is listed and callable there. In both eras.
func TestAggregateFilteredTool(t *testing.T) {
	mark := fmt.Sprintf("e2e-agg-filter-%d", time.Now().UnixNano())
	fs := pagedServer{Name: "fs", Tools: []string{"read_file", "write_file", "delete_file", "secret_token", "calls"}}
	db := pagedServer{Name: "db", Tools: []string{"query", "drop_table", "vacuum", "calls"}}
	base := startGateway(t, map[string]any{
		"mcpServers": map[string]any{
			"fs": pagedEntry(fs, mark, map[string]any{"tools": map[string]any{"deny": []string{"secret_*"}}}),
			"db": pagedEntry(db, mark, map[string]any{"tools": map[string]any{"allow": []string{"query", "drop_*", "calls"}}}),
		},
		"gateway": map[string]any{"endpoints": map[string]any{
			"safe": map[string]any{"servers": []string{"fs", "db"}, "tools": map[string]any{"deny": []string{"*drop*", "*delete*"}}},
		}},
	})
	wantSafe := []string{"db__calls", "db__query", "fs__calls", "fs__read_file", "fs__write_file"}
	wantAll := []string{"db__calls", "db__drop_table", "db__query", "fs__calls", "fs__delete_file", "fs__read_file", "fs__write_file"}
	filtered := []string{"fs__secret_token", "db__vacuum", "db__drop_table", "fs__delete_file"}

	for _, era := range aggregateEras {
		t.Run(era, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			safe := connectSDK(t, ctx, base+"/endpoints/safe/mcp", era)
			if got := waitTools(t, ctx, safe, "the members up", hasAll(wantSafe)); setDiff(wantSafe, got) != "" {
				t.Errorf("endpoint safe: %s", setDiff(wantSafe, got))
			}
			// What each server has received so far (calls of earlier subtests included).
			calledBefore := map[string]int{}
			for _, s := range []string{"fs", "db"} {
				calledBefore[s] = len(serverCalls(t, ctx, safe.cs, s))
			}
			// What a tool that does not exist gets, for comparison.
			const unknown = "fs__no_such_tool"
			ref := callOutcome(t, ctx, safe.cs, unknown, map[string]any{"message": "x"})
			if !ref.failed() {
				t.Fatalf("%s: %s", unknown, ref)
			}
			t.Logf("a tool that does not exist: %s", ref)
			for _, name := range filtered {
				o := callOutcome(t, ctx, safe.cs, name, map[string]any{"message": "guessed"})
				switch {
				case !o.failed():
					t.Errorf("filtered %s was called: %s", name, o)
				case o.code != ref.code || strings.ReplaceAll(o.message(), name, unknown) != ref.message():
					t.Errorf("filtered %s: %s; want the same as a tool that does not exist: %s", name, o, ref)
				}
			}
			for _, s := range []string{"fs", "db"} {
				called := serverCalls(t, ctx, safe.cs, s)
				for _, c := range called[min(calledBefore[s], len(called)):] {
					if slices.Contains(filtered, s+"__"+c) {
						t.Errorf("server %s received a call of its filtered tool %s", s, c)
					}
				}
			}
			if got := mustCall(t, ctx, safe.cs, "fs__read_file", map[string]any{"message": "allowed"}); got != "fs/read_file: allowed" {
				t.Errorf("fs__read_file: %q", got)
			}

			// The default endpoint has only the servers' own filters.
			all := connectSDK(t, ctx, base+"/mcp", era)
			if got := waitTools(t, ctx, all, "the members up", hasAll(wantAll)); setDiff(wantAll, got) != "" {
				t.Errorf("default endpoint: %s", setDiff(wantAll, got))
			}
			if o := callOutcome(t, ctx, all.cs, "fs__secret_token", nil); !o.failed() {
				t.Errorf("fs__secret_token (denied by its server) through the default endpoint: %s", o)
			}
			if got := mustCall(t, ctx, all.cs, "fs__delete_file", map[string]any{"message": "m"}); got != "fs/delete_file: m" {
				t.Errorf("fs__delete_file through the default endpoint: %q", got)
			}
			// The server's record of calls does show the calls that reached it.
			if called := serverCalls(t, ctx, all.cs, "fs"); len(called) == 0 || called[len(called)-1] != "delete_file" {
				t.Errorf("fs's calls %v do not end with the delete_file called through the default endpoint", called)
			}
		})
	}
}

// serverCalls returns the tools a paged server was called for so far, in order, from its tool
// "calls" (through PREFIX__calls, the prefix being the server's name).
func serverCalls(t *testing.T, ctx context.Context, cs *mcp.ClientSession, server string) []string {
	t.Helper()
	var called []string
	text := mustCall(t, ctx, cs, server+"__calls", nil)
	if err := json.Unmarshal([]byte(text), &called); err != nil {
		t.Fatalf("%s__calls: %q", server, text)
	}
	return called
}

// TestAggregateLongNames: exposed names longer than maxNameLength (64 by default) are shortened
// deterministically: every exposed name fits, one of exactly 64 is kept, two long names sharing
// their first 64 characters get different names, the same config gives the same names in
// another gateway process and in the other era, and each shortened tool and prompt name routes
// back to its original (the server answers with the name it was called by). An endpoint with
// "maxNameLength": 32 shortens harder.
func TestAggregateLongNames(t *testing.T) {
	const server = "longserver" // prefix "longserver__": 12 characters
	fit := strings.Repeat("f", 64-12)
	over := strings.Repeat("o", 64-12+1)
	twinA := strings.Repeat("t", 70) + "_alpha"
	twinB := strings.Repeat("t", 70) + "_bravo"
	huge := strings.Repeat("h", 120)
	longPrompt := "prompt_" + strings.Repeat("p", 60)
	s := pagedServer{Name: server, Tools: []string{"echo", fit, over, twinA, twinB, huge}, Prompts: []string{"short", longPrompt}}
	mark := fmt.Sprintf("e2e-agg-long-%d", time.Now().UnixNano())
	cfg := map[string]any{
		"mcpServers": map[string]any{server: pagedEntry(s, mark, nil)},
		"gateway": map[string]any{"endpoints": map[string]any{
			"long":  map[string]any{"servers": []string{server}},
			"tight": map[string]any{"servers": []string{server}, "maxNameLength": 32},
		}},
	}
	base := startGateway(t, cfg)

	exposedNames := func(t *testing.T, url, era string, limit int) map[string]string {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		c := connectSDK(t, ctx, url, era)
		waitTools(t, ctx, c, "the server up", func(names []string) bool { return len(names) > 0 })
		names, tools := listTools(t, ctx, c.cs)
		byOriginal := map[string]string{} // original tool name -> exposed name
		for _, n := range names {
			// The description names the original: "Tool ORIGINAL of longserver".
			orig, ok := strings.CutPrefix(strings.TrimSuffix(tools[n].Description, " of "+server), "Tool ")
			if !ok || !slices.Contains(s.Tools, orig) {
				t.Errorf("%s: tool %s has description %q", url, n, tools[n].Description)
				continue
			}
			byOriginal[orig] = n
			if len(n) > limit {
				t.Errorf("%s: exposed name %s has %d characters, over %d", url, n, len(n), limit)
			}
			full := server + "__" + orig
			if len(full) <= limit && n != full {
				t.Errorf("%s: %s fits in %d characters but is exposed as %s", url, full, limit, n)
			}
			if len(full) > limit && n == full {
				t.Errorf("%s: %s was not shortened", url, full)
			}
			// Round trip: the shortened name reaches the original tool.
			if got, want := mustCall(t, ctx, c.cs, n, map[string]any{"message": era}), server+"/"+orig+": "+era; got != want {
				t.Errorf("%s: calling %s: %q, want %q", url, n, got, want)
			}
		}
		if len(byOriginal) != len(s.Tools) || len(names) != len(s.Tools) {
			t.Errorf("%s: %d tools listed (%v), want %d", url, len(names), names, len(s.Tools))
		}
		// Prompts too.
		prompts := listPrompts(t, ctx, c.cs)
		if len(prompts) != len(s.Prompts) {
			t.Errorf("%s: prompts %v, want %d", url, prompts, len(s.Prompts))
		}
		for _, p := range prompts {
			if len(p) > limit {
				t.Errorf("%s: exposed prompt name %s has %d characters, over %d", url, p, len(p), limit)
			}
			res, err := c.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: p})
			if err != nil || len(res.Messages) != 1 {
				t.Errorf("%s: prompts/get %s: %+v, %v", url, p, res, err)
				continue
			}
			orig, _ := strings.CutPrefix(textContent(res.Messages[0].Content), server+"/")
			if !slices.Contains(s.Prompts, orig) {
				t.Errorf("%s: prompts/get %s reached %q", url, p, textContent(res.Messages[0].Content))
			}
			byOriginal["prompt "+orig] = p
		}
		return byOriginal
	}

	first := exposedNames(t, base+"/endpoints/long/mcp", eraSession, 64)
	t.Logf("exposed names: %v", first)
	if first[twinA] == first[twinB] {
		t.Errorf("two long names sharing their first 64 characters got the same exposed name %s", first[twinA])
	}
	if got := exposedNames(t, base+"/endpoints/long/mcp", eraModern, 64); !maps.Equal(first, got) {
		t.Errorf("in %s the exposed names differ: %v, in %s: %v", eraModern, got, eraSession, first)
	}
	if got := exposedNames(t, base+"/mcp", eraSession, 64); !maps.Equal(first, got) {
		t.Errorf("through the default endpoint the exposed names differ: %v, want %v", got, first)
	}
	tight := exposedNames(t, base+"/endpoints/tight/mcp", eraSession, 32)
	t.Logf("exposed names with maxNameLength 32: %v", tight)
	if len(slices.Compact(slices.Sorted(maps.Values(tight)))) != len(tight) {
		t.Errorf("with maxNameLength 32 two names collide: %v", tight)
	}

	// Another gateway process with the same config: the same names (a stable hash, not a
	// counter or a random salt).
	other := startGateway(t, cfg)
	if got := exposedNames(t, other+"/endpoints/long/mcp", eraSession, 64); !maps.Equal(first, got) {
		t.Errorf("another gateway process exposes %v, the first %v", got, first)
	}
}

// --- helpers: the Go SDK client --------------------------------------------------------------

// sdkClient is a Go SDK client session that counts notifications/tools/list_changed.
type sdkClient struct {
	cs           *mcp.ClientSession
	toolsChanged chan struct{} // one value per notification, never blocking the SDK
}

// connectSDK connects the official Go SDK client to url negotiating version (the standalone
// SSE stream open in a session, subscriptions/listen in 2026-07-28), closing it at cleanup.
func connectSDK(t *testing.T, ctx context.Context, url, version string) *sdkClient {
	t.Helper()
	c := &sdkClient{toolsChanged: make(chan struct{}, 1000)}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e-aggregate", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case c.toolsChanged <- struct{}{}:
			default:
			}
		},
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connecting to %s in %s: %v", url, version, err)
	}
	t.Cleanup(func() { cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != version {
		t.Errorf("%s: negotiated %q, want %q", url, got, version)
	}
	c.cs = cs
	return c
}

// drain forgets the notifications received so far.
func (c *sdkClient) drain() {
	for {
		select {
		case <-c.toolsChanged:
		default:
			return
		}
	}
}

// waitToolsChanged waits for a notifications/tools/list_changed, at most timeout.
func (c *sdkClient) waitToolsChanged(timeout time.Duration) bool {
	select {
	case <-c.toolsChanged:
		return true
	case <-time.After(timeout):
		return false
	}
}

// waitTools lists the tools until ok accepts the names, and returns them. A member that is not
// ready yet (the gateway listens before its servers have started) is hidden from the lists, and
// the client gets notifications/tools/list_changed once it is shown: so between listings this
// waits for that notification, not for time to pass, and fails if none comes within 60s.
func waitTools(t *testing.T, ctx context.Context, c *sdkClient, what string, ok func([]string) bool) []string {
	t.Helper()
	start := time.Now()
	for {
		names, _ := listTools(t, ctx, c.cs)
		if ok(names) {
			return names
		}
		if !c.waitToolsChanged(60 * time.Second) {
			t.Fatalf("%s: tools/list is %v, and no notifications/tools/list_changed came within 60s (%v since the first listing)",
				what, names, time.Since(start).Round(time.Millisecond))
		}
	}
}

// hasAll returns a waitTools condition: every name of want is listed.
func hasAll(want []string) func([]string) bool {
	return func(got []string) bool {
		for _, w := range want {
			if !slices.Contains(got, w) {
				return false
			}
		}
		return true
	}
}

// listTools lists every tool, page by page, failing on a repeated cursor; it returns the
// names in order, the tools by name and the number of pages.
func listTools(t *testing.T, ctx context.Context, cs *mcp.ClientSession) ([]string, map[string]*mcp.Tool) {
	names, tools, _ := listToolPages(t, ctx, cs)
	return names, tools
}

func listToolPages(t *testing.T, ctx context.Context, cs *mcp.ClientSession) ([]string, map[string]*mcp.Tool, int) {
	t.Helper()
	var names []string
	tools := map[string]*mcp.Tool{}
	seen := map[string]bool{}
	params := &mcp.ListToolsParams{}
	for pages := 1; ; pages++ {
		res, err := cs.ListTools(ctx, params)
		if err != nil {
			t.Fatalf("tools/list (page %d, cursor %q): %v", pages, params.Cursor, err)
		}
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
			tools[tool.Name] = tool
		}
		if res.NextCursor == "" {
			return names, tools, pages
		}
		if seen[res.NextCursor] || pages > 1000 {
			t.Fatalf("tools/list: cursor %q repeats", res.NextCursor)
		}
		seen[res.NextCursor] = true
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
}

func listPrompts(t *testing.T, ctx context.Context, cs *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for p, err := range cs.Prompts(ctx, nil) {
		if err != nil {
			t.Fatalf("prompts/list: %v", err)
		}
		names = append(names, p.Name)
	}
	return names
}

func listResources(t *testing.T, ctx context.Context, cs *mcp.ClientSession) []string {
	t.Helper()
	var uris []string
	for r, err := range cs.Resources(ctx, nil) {
		if err != nil {
			t.Fatalf("resources/list: %v", err)
		}
		uris = append(uris, r.URI)
	}
	return uris
}

// outcome is what a tools/call got: a result (an error result if isError) or a JSON-RPC error.
type outcome struct {
	text    string // the result's text content
	isError bool   // the result's isError
	rpcErr  bool   // a JSON-RPC error
	code    int64
	msg     string
}

func (o outcome) failed() bool { return o.isError || o.rpcErr }

// message is the error's message, or the error result's text.
func (o outcome) message() string {
	if o.rpcErr {
		return o.msg
	}
	return o.text
}

func (o outcome) String() string {
	switch {
	case o.rpcErr:
		return fmt.Sprintf("JSON-RPC error %d %q", o.code, o.msg)
	case o.isError:
		return fmt.Sprintf("error result %q", o.text)
	}
	return fmt.Sprintf("result %q", o.text)
}

func callOutcome(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) outcome {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		var werr *jsonrpc.Error
		if !errors.As(err, &werr) {
			t.Fatalf("tools/call %s: not a JSON-RPC error: %v", name, err)
		}
		return outcome{rpcErr: true, code: werr.Code, msg: werr.Message}
	}
	var text []string
	for _, c := range res.Content {
		text = append(text, textContent(c))
	}
	return outcome{text: strings.Join(text, "\n"), isError: res.IsError}
}

// mustCall calls a tool and returns its text, failing the test on any error.
func mustCall(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) string {
	t.Helper()
	o := callOutcome(t, ctx, cs, name, args)
	if o.failed() {
		t.Fatalf("tools/call %s: %s", name, o)
	}
	return o.text
}

func textContent(c mcp.Content) string {
	if tc, ok := c.(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

// setDiff describes how got differs from want as sets (and names duplicates), or returns "".
func setDiff(want, got []string) string {
	var missing, extra, dup []string
	count := map[string]int{}
	for _, g := range got {
		count[g]++
		if count[g] == 2 {
			dup = append(dup, g)
		}
	}
	for _, w := range want {
		if count[w] == 0 {
			missing = append(missing, w)
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			extra = append(extra, g)
		}
	}
	if len(missing)+len(extra)+len(dup) == 0 {
		return ""
	}
	return fmt.Sprintf("missing %v, unexpected %v, listed twice %v (got %d: %v)", missing, extra, dup, len(got), got)
}

// seqDiff is setDiff, and also wants the same order when the sets agree.
func seqDiff(want, got []string) string {
	if d := setDiff(want, got); d != "" {
		return d
	}
	if !slices.Equal(want, got) {
		return fmt.Sprintf("same items in another order: %v, before %v", got, want)
	}
	return ""
}
