package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Aggregation e2e: filters and long names (see aggregate_test.go for the harness).

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
