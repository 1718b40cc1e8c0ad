package aggregate

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestViewCacheBounded: views are kept within the bound in bytes, the
// least recently used evicted first (and built again when asked for); a
// view larger than the bound is refused, not kept; sessions asking for a
// view being built share that one build.
func TestViewCacheBounded(t *testing.T) {
	vc := viewCache{max: 1000}
	sized := func(n int64) func() (*view, error) { return func() (*view, error) { return &view{size: n}, nil } }
	for _, key := range []string{"a", "b", "a"} { // a used last
		if _, err := vc.get(key, sized(400)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := vc.get("c", sized(400)); err != nil {
		t.Fatal(err)
	}
	if views, size := vc.stats(); views != 2 || size != 800 {
		t.Errorf("%d views of %d bytes kept, want 2 of 800 (bound 1000)", views, size)
	}
	built := vc.builds.Load()
	vc.get("a", sized(400)) // kept: not built
	vc.get("b", sized(400)) // evicted: built again
	if n := vc.builds.Load() - built; n != 1 {
		t.Errorf("%d builds for a kept view and an evicted one, want 1", n)
	}
	var big errTooBig
	if _, err := vc.get("huge", sized(1001)); !errors.As(err, &big) || big.size != 1001 {
		t.Errorf("a view over the bound: %v, want errTooBig", err)
	}
	if _, size := vc.stats(); size > 1000 {
		t.Errorf("%d bytes kept, over the bound", size)
	}

	var builds atomic.Int64
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			v, err := vc.get("shared", func() (*view, error) {
				builds.Add(1)
				<-release
				return &view{size: 10}, nil
			})
			if err != nil || v == nil {
				t.Errorf("shared view: %v", err)
			}
		})
	}
	// Every caller is either building or waiting for the build once the
	// entry exists; let them pile up, then release.
	testkit.WaitFor(t, "the build under way", func() bool { return builds.Load() == 1 })
	close(release)
	wg.Wait()
	if n := builds.Load(); n != 1 {
		t.Errorf("%d builds of one view asked for by 8 sessions at once, want 1", n)
	}
}

// TestMaxListBytesNamesKey: a member's list over maxListBytes, and a
// merged list over it, are refused with an error naming the config key:
// the list request fails (it is never answered without that member's
// items), and a call to the member's tool says why.
func TestMaxListBytesNamesKey(t *testing.T) {
	const key = "gateway.endpoints.ep.maxListBytes"
	big := fakeMember(t, "big", testkit.FakeOptions{Catalog: testkit.CatalogOptions{GeneratedTools: 100}}) // about 55 kB
	small := fakeMember(t, "small", testkit.FakeOptions{})
	e := newEndpoint(t, Options{MaxListBytes: 30 << 10}, big, small)
	cl := connect(t, e, `{}`)
	r := text(t, cl.do(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if !strings.Contains(r, "error") || !strings.Contains(r, key) || !strings.Contains(r, `"big"`) {
		t.Errorf("tools/list with a member over the bound: %q, want an error naming %s and the server", r, key)
	}
	if got := text(t, cl.callTool(2, "big__gen_00001", `{"message":"m"}`)); !strings.Contains(got, key) {
		t.Errorf("a call to the member whose list was refused: %q, want an error naming %s", got, key)
	}
	if got := text(t, cl.callTool(3, "small__echo", `{"message":"m"}`)); got != "m" {
		t.Errorf("the other member's call: %q", got)
	}

	// Each member's list within the bound, the merged list over it.
	a := fakeMember(t, "a", testkit.FakeOptions{Catalog: testkit.CatalogOptions{GeneratedTools: 40}})
	b := fakeMember(t, "b", testkit.FakeOptions{Catalog: testkit.CatalogOptions{GeneratedTools: 40}})
	e2 := newEndpoint(t, Options{MaxListBytes: 40 << 10}, a, b)
	cl2 := connect(t, e2, `{}`)
	r = text(t, cl2.do(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if !strings.Contains(r, "error") || !strings.Contains(r, key) || !strings.Contains(r, "merged tools/list") {
		t.Errorf("a merged list over the bound: %q, want an error naming %s", r, key)
	}
}
