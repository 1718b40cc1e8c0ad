package front

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The cache keeps, per target, each listed tool's annotations (none for an
// invalid one), replaces a tool's entry with a newer list's, and starts
// over, counted, past maxParamTools.
func TestParamToolsObserve(t *testing.T) {
	var p paramTools
	p.observe("a", []byte(`{"jsonrpc":"2.0","id":0,"result":{"tools":[{"name":"plain","inputSchema":{"type":"object"}}]}}`))
	if p.annotated.Load() {
		t.Errorf("annotated after a list of no Mcp-Param annotation")
	}
	p.observe("a", []byte(`{"jsonrpc":"2.0","id":1,"result":{"tools":[
		{"name":"where","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}},
		{"name":"bad","inputSchema":{"type":"object","properties":{"n":{"type":"number","x-mcp-header":"N"}}}},
		{"name":"plain","inputSchema":{"type":"object"}}]}}`))
	if got, ok := p.lookup("a", "where"); !ok || len(got) != 1 || got[0].Name != "Region" {
		t.Errorf("where: %v %v", got, ok)
	}
	if !p.annotated.Load() {
		t.Errorf("not annotated after a list with an Mcp-Param annotation: calls without headers go unchecked")
	}
	if got, ok := p.lookup("a", "bad"); !ok || got != nil {
		t.Errorf("bad: %v %v, want known without annotations", got, ok)
	}
	if _, ok := p.lookup("b", "where"); ok {
		t.Errorf("another target's tool known")
	}
	p.observe("a", []byte(`{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"where","inputSchema":{"type":"object"}}]}}`))
	if got, ok := p.lookup("a", "where"); !ok || len(got) != 0 {
		t.Errorf("where after a newer list: %v %v", got, ok)
	}
	p.observe("a", []byte(`{"jsonrpc":"2.0","id":3,"error":{"code":-32000,"message":"x"}}`))
	if _, ok := p.lookup("a", "plain"); !ok {
		t.Errorf("an error reply changed the cache")
	}

	var b strings.Builder
	b.WriteString(`{"result":{"tools":[`)
	for i := range maxParamTools {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"t%d","inputSchema":{}}`, i)
	}
	b.WriteString(`]}}`)
	p.observe("a", []byte(b.String()))
	if _, ok := p.lookup("a", "plain"); ok || p.resets.Load() != 1 {
		t.Errorf("over maxParamTools: old entries kept (resets %d)", p.resets.Load())
	}
	if _, ok := p.lookup("a", fmt.Sprintf("t%d", maxParamTools-1)); !ok {
		t.Errorf("the newest list's tools not kept")
	}
	// The cache is keyed by target and principal: forget drops the
	// target's for every principal, and no other target's.
	p.observe(paramKey("s", "key\x00alice"), []byte(`{"result":{"tools":[{"name":"x","inputSchema":{}}]}}`))
	p.observe(paramKey("s", ""), []byte(`{"result":{"tools":[{"name":"x","inputSchema":{}}]}}`))
	p.observe(paramKey("s2", ""), []byte(`{"result":{"tools":[{"name":"x","inputSchema":{}}]}}`))
	p.forget("s")
	if _, ok := p.lookup(paramKey("s", "key\x00alice"), "x"); ok {
		t.Errorf("forget kept the target's tools")
	}
	if _, ok := p.lookup(paramKey("s", ""), "x"); ok {
		t.Errorf("forget kept the target's tools")
	}
	if _, ok := p.lookup(paramKey("s2", ""), "x"); !ok {
		t.Errorf("forget dropped another target's tools")
	}
}

// A target is listed by the gateway at most once per paramRefetch,
// whatever the calls of unknown tools.
func TestParamToolsClaimFetch(t *testing.T) {
	var p paramTools
	t0 := time.Unix(1000, 0)
	if _, ok := p.claimFetch("a", t0); !ok {
		t.Fatal("first fetch refused")
	}
	if _, ok := p.claimFetch("a", t0.Add(paramRefetch-time.Nanosecond)); ok {
		t.Error("a second fetch within paramRefetch")
	}
	if _, ok := p.claimFetch("b", t0); !ok {
		t.Error("another target's fetch refused")
	}
	if _, ok := p.claimFetch("a", t0.Add(paramRefetch)); !ok {
		t.Error("a fetch after paramRefetch refused")
	}
}
