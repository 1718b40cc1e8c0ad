package authserver

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzGrantOf: no Redis hash crashes the decoding of a grant, and one it
// accepts encodes back to the same fields.
func FuzzGrantOf(f *testing.F) {
	h := hexHash(secret("r"))
	f.Add(`{"id":"g1","user":"ann","scopes":["mcp"]}`, h, h+" "+h, "1700000000000", "1700000000000")
	f.Add(`{}`, "", "", "", "")
	f.Add(`{"id":"g"}`, "zz", "", "1", "x")
	f.Fuzz(func(t *testing.T, js, refresh, previous, expires, lastUsed string) {
		g, err := grantOf(map[string]string{"json": js, "refresh": refresh, "previous": previous, "expires": expires, "lastUsed": lastUsed})
		if err != nil {
			return
		}
		if hexHash(g.Refresh) != strings.ToLower(refresh) || joinHashes(g.Previous) != strings.ToLower(strings.Join(strings.Fields(previous), " ")) {
			t.Fatalf("refresh %q previous %q decoded as %x %v", refresh, previous, g.Refresh, g.Previous)
		}
		if ms, _ := strconv.ParseInt(expires, 10, 64); g.Expires.UnixMilli() != ms {
			t.Fatalf("expires %q decoded as %d", expires, g.Expires.UnixMilli())
		}
	})
}
