package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/modern"
)

// toolsPage is a tools/list reply naming tools t<from> to t<to-1>, each
// with an x-mcp-header annotation on its "region".
func toolsPage(from, to int) []byte {
	var b strings.Builder
	b.WriteString(`{"jsonrpc":"2.0","id":1,"result":{"tools":[`)
	for i := from; i < to; i++ {
		if i > from {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"name":"t%d","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}}`, i)
	}
	b.WriteString(`]}}`)
	return []byte(b.String())
}

// A server of 4,000 tools in pages of 1,000, listed again and again (each
// client lists; many read the first page only): the tools stay known, and
// a call of one on the last page with a header disagreeing with its
// arguments stays refused. On the old code every page after the first
// round counted its names again, over maxParamTools: the cache started
// over on each, the last page's tools were forgotten, and the call went
// unchecked (a reset counted per list).
func TestParamToolsRelistedKeepsEveryPage(t *testing.T) {
	var p paramTools
	for range 3 {
		for from := 0; from < 4000; from += 1000 {
			p.observe("big", toolsPage(from, from+1000))
		}
		p.observe("big", toolsPage(0, 1000)) // a client reading one page
	}
	if n := p.resets.Load(); n != 0 {
		t.Errorf("%d resets for a server of 4,000 tools listed again", n)
	}
	params, ok := p.lookup("big", "t3999")
	if !ok {
		t.Fatal("the last page's tool forgotten")
	}
	h := http.Header{}
	h.Set("Mcp-Param-Region", "us")
	if prob := modern.CheckParamHeaders(h, params, []byte(`{"region":"eu"}`)); prob == nil {
		t.Errorf("a disagreeing header of t3999 not refused")
	}
	// A server that really lists more than the bound still starts over.
	p.observe("big", toolsPage(4000, 4000+maxParamTools))
	if n := p.resets.Load(); n != 1 {
		t.Errorf("%d resets past maxParamTools, want 1", n)
	}
}

// The (target, principal) pairs are bounded: principals without end (a
// token issuer's every subject) cannot grow the cache without end.
func TestParamToolsKeysBounded(t *testing.T) {
	var p paramTools
	for i := range 3 * maxParamKeys {
		p.observe(paramKey("s", fmt.Sprint("key\x00p", i)), toolsPage(0, 1))
	}
	p.mu.Lock()
	n := len(p.byTarget)
	p.mu.Unlock()
	if n > maxParamKeys {
		t.Errorf("%d keys kept, bound %d", n, maxParamKeys)
	}
	if p.resets.Load() == 0 {
		t.Errorf("the keys dropped uncounted")
	}
}
