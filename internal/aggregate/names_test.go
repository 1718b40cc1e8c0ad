package aggregate

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/conn"
)

// nopBackend is a member backend for tests that never open a session.
type nopBackend struct {
	conn.SessionsOnly
	conn.OwnerBound
}

func (nopBackend) Open(context.Context, conn.Stream) (conn.Conn, error) {
	return nil, context.Canceled
}

func TestSnakeCaseNames(t *testing.T) {
	for in, want := range map[string]string{
		"getUserID":     "get_user_id",
		"HTTPServer":    "http_server",
		"get-user.info": "get_user_info",
		"already_snake": "already_snake",
		"foo_Bar":       "foo_bar",
		"v2Beta":        "v2_beta",
		"":              "",
	} {
		if got := snakeCase(in); got != want {
			t.Errorf("snakeCase(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestExpose(t *testing.T) {
	n := naming{sep: "__", max: 64}
	if got := n.expose("github", "create_issue"); got != "github__create_issue" {
		t.Errorf("expose: %q", got)
	}
	if got := n.expose("", "x"); got != "x" {
		t.Errorf("empty prefix: %q", got)
	}
	long := n.expose("srv", strings.Repeat("é", 40)) // 80 bytes of name
	if len(long) > 64 || !utf8.ValidString(long) || long != n.expose("srv", strings.Repeat("é", 40)) {
		t.Errorf("shortened %q (%d bytes): want at most 64, valid UTF-8, stable", long, len(long))
	}
}

func TestTemplateRegexp(t *testing.T) {
	for _, tc := range []struct {
		tmpl, uri string
		want      bool
	}{
		{"note://{id}", "note://7", true},
		{"note://{id}", "note://", false},
		{"note://{id}", "note://7/8", false},
		{"file:///{+path}", "file:///a/b/c", true},
		{"db://{table}/rows/{row}.json", "db://users/rows/42.json", true},
		{"db://{table}/rows/{row}.json", "db://users/rows/42.xml", false},
		{"a.b://{x}", "aXb://1", false}, // literal text is literal
		{"broken://{x", "broken://{x", false},
	} {
		re := templateRegexp(tc.tmpl)
		if got := re != nil && re.MatchString(tc.uri); got != tc.want {
			t.Errorf("%q matches %q: %v, want %v", tc.tmpl, tc.uri, got, tc.want)
		}
	}
}

func TestCursorRoundTrip(t *testing.T) {
	for _, tc := range []struct{ member, offset int }{{0, 0}, {1, 3}, {300, 1 << 20}} {
		c := encodeCursor(tc.member, tc.offset)
		m, off, err := decodeCursor(c, 301)
		if err != nil || m != tc.member || off != tc.offset {
			t.Errorf("cursor %q of (%d, %d) decoded as (%d, %d, %v)", c, tc.member, tc.offset, m, off, err)
		}
		if _, _, err := decodeCursor(c, tc.member); err == nil {
			t.Errorf("cursor of member %d accepted with %d members", tc.member, tc.member)
		}
	}
	enc := func(b ...byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	for _, bad := range []string{
		"", "AQ", enc(1, 0, 'x'), // version 1: a member's own cursor
		enc(2, 0), enc(2, 0, 0, 0), // the offset missing, a byte after it
		enc(2, 0x80, 0x00, 0), enc(2, 0, 0x80, 0x00), // varints longer than needed
		enc(2, 0, 0xff, 0xff, 0xff, 0xff, 0x0f), // an offset over 2^31
		enc(2, 5, 0),                            // no member 5
		enc(2, 0, 0) + "=", strings.Repeat("A", maxCursorLen+1),
	} {
		if m, off, err := decodeCursor(bad, 5); err == nil {
			t.Errorf("cursor %q accepted as (%d, %d)", bad, m, off)
		}
	}
}

// FuzzDecodeCursor: no client cursor crashes the decoder, and what it
// accepts names a member and is exactly the cursor encodeCursor makes.
func FuzzDecodeCursor(f *testing.F) {
	f.Add(encodeCursor(0, 0), 3)
	f.Add(encodeCursor(2, 70), 3)
	f.Add("AQ", 1)
	f.Add("////", 2)
	f.Add("AYCAgICAgICAgAE", 2)
	f.Fuzz(func(t *testing.T, c string, members int) {
		if members <= 0 || members > 1000 {
			return
		}
		m, off, err := decodeCursor(c, members)
		if err != nil {
			return
		}
		if m < 0 || m >= members || off < 0 {
			t.Fatalf("decoded (%d, %d) with %d members", m, off, members)
		}
		if again := encodeCursor(m, off); again != c {
			t.Fatalf("%q decoded as (%d, %d), which encodes as %q", c, m, off, again)
		}
	})
}

// FuzzNames: every exposed name is within the limit, stable, and routes
// back to the member's own name through the view (unless it collides,
// which is then reported, never merged).
func FuzzNames(f *testing.F) {
	f.Add("github", "create_issue", "list_issues", false, 64)
	f.Add("", "getUserInfo", "get_user_info", true, 16)
	f.Add("srv", strings.Repeat("x", 100), strings.Repeat("x", 99)+"y", false, 64)
	f.Add("MyServer", "a-b", "a_b", true, 20)
	f.Fuzz(func(t *testing.T, prefix, name1, name2 string, snake bool, max int) {
		if max < minMaxNameLen || max > 256 || !utf8.ValidString(prefix) || !utf8.ValidString(name1) || !utf8.ValidString(name2) || name1 == "" || name2 == "" || name1 == name2 {
			return
		}
		e := &Endpoint{opts: Options{Name: "e"}, slots: []*slot{newSlot(Member{Name: "m", Prefix: prefix}, true, "ready")},
			naming: naming{sep: "__", max: max, snake: snake}, log: discardLog}
		x1, x2 := e.naming.expose(prefix, name1), e.naming.expose(prefix, name2)
		for _, x := range []string{x1, x2} {
			if len(x) > max || !utf8.ValidString(x) {
				t.Fatalf("exposed %q: %d bytes (max %d) or not UTF-8", x, len(x), max)
			}
		}
		if x1 != e.naming.expose(prefix, name1) {
			t.Fatal("expose is not stable")
		}
		raw := func(name string) json.RawMessage { return append(append([]byte(`{"name":`), quote(name)...), '}') }
		l := &memberList{items: []item{{raw: raw(name1), key: name1}, {raw: raw(name2), key: name2}}}
		v := e.buildView(kindTools, []*memberList{l}, []*Member{e.member(0)}, e.allowed)
		if !json.Valid(v.whole) {
			t.Fatalf("the merged list is not JSON: %s", v.whole)
		}
		if x1 == x2 {
			if len(v.byName) != 0 || len(v.collisions[x1]) != 2 {
				t.Fatalf("%q and %q both expose %q: want a collision, got %+v", name1, name2, x1, v)
			}
			return
		}
		if v.byName[x1] != (entry{0, name1}) || v.byName[x2] != (entry{0, name2}) {
			t.Fatalf("view %+v does not route %q and %q back", v.byName, x1, x2)
		}
	})
}

// FuzzServerID: a member's server request id survives the round trip to
// the client and back, with the member's generation; anything else a
// client sends as an id is refused or names a member that exists, in one
// spelling only.
func FuzzServerID(f *testing.F) {
	f.Add(0, uint64(0), []byte(`17`), []byte(`"m0:17"`))
	f.Add(3, uint64(2), []byte(`"s-1"`), []byte(`"m3.2:\"x\""`))
	f.Add(1, uint64(1), []byte(`4`), []byte(`"m1.0:4"`))
	f.Fuzz(func(t *testing.T, member int, gen uint64, id, client []byte) {
		if m, g, raw, ok := decodeServerID(client, 4); ok {
			if m < 0 || m >= 4 || len(raw) == 0 {
				t.Fatalf("decoded %q as member %d id %q", client, m, raw)
			}
			// Escapes aside (the id is a JSON string), one spelling.
			got, _ := jsontext.AppendUnquote(nil, client)
			want, _ := jsontext.AppendUnquote(nil, encodeServerID(m, g, raw))
			if string(got) != string(want) {
				t.Fatalf("decoded %q as (%d, %d, %s), which is spelled %s", client, m, g, raw, want)
			}
		}
		if member < 0 || member >= 4 || !validID(id) {
			return
		}
		m, g, raw, ok := decodeServerID(encodeServerID(member, gen, id), 4)
		if !ok || m != member || g != gen || string(raw) != string(id) {
			t.Fatalf("(%d, %d, %s) came back as (%d, %d, %s, %v)", member, gen, id, m, g, raw, ok)
		}
	})
}

// validID reports whether b is an id a member's session may use: a JSON
// string or number, as it is.
func validID(b []byte) bool {
	_, _, raw, ok := decodeServerID(append(append([]byte(`"m0:`), jsonEscape(b)...), '"'), 1)
	return ok && string(raw) == string(b)
}

func jsonEscape(b []byte) []byte {
	q := quote(string(b))
	return q[1 : len(q)-1]
}

var discardLog = slog.New(slog.DiscardHandler)

// TestMergedCaching: a merged list carries the smallest ttlMs of the
// members' pages and is public only if every page is; a page without hints
// (a member of the session eras) leaves them to the front's safe default;
// a member under a policy makes it private.
func TestMergedCaching(t *testing.T) {
	mk := func(result string) page {
		t.Helper()
		p, err := parsePage(kindTools, "", []byte(result))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := mk(`{"tools":[],"ttlMs":60000,"cacheScope":"public"}`)
	b := mk(`{"tools":[],"ttlMs":5000,"cacheScope":"public"}`)
	priv := mk(`{"tools":[],"ttlMs":90000,"cacheScope":"private"}`)
	legacy := mk(`{"tools":[]}`)
	for _, tc := range []struct {
		name    string
		members [][]page // each member's pages
		policy  bool     // the second member has a policy
		want    string
	}{
		{"smallest, public", [][]page{{a}, {b}}, false, `{"ttlMs":5000,"cacheScope":"public","tools":[]}`},
		{"smallest of one member's pages", [][]page{{a, b}}, false, `{"ttlMs":5000,"cacheScope":"public","tools":[]}`},
		{"private if any", [][]page{{a}, {priv}}, false, `{"ttlMs":60000,"cacheScope":"private","tools":[]}`},
		{"private under a policy", [][]page{{a}, {b}}, true, `{"ttlMs":5000,"cacheScope":"private","tools":[]}`},
		{"a page without hints", [][]page{{a}, {legacy}}, false, `{"tools":[]}`},
		{"first without hints", [][]page{{legacy, a}}, false, `{"tools":[]}`},
		{"none", nil, false, `{"tools":[]}`},
	} {
		var in interner
		members := []Member{{Name: "m0"}, {Name: "m1"}}
		if tc.policy {
			members[1].Policy = denyAll{}
		}
		e := &Endpoint{opts: Options{Name: "e"}, naming: naming{sep: "__", max: 64}, log: discardLog}
		for _, m := range members {
			e.slots = append(e.slots, newSlot(m, true, "ready"))
		}
		lists := make([]*memberList, 2)
		for i, pages := range tc.members {
			lists[i] = in.intern(pages)
		}
		if got := string(e.buildView(kindTools, lists, []*Member{e.member(0), e.member(1)}, e.allowed).whole); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// denyAll is a policy that allows nothing.
type denyAll struct{}

func (denyAll) Allows(*auth.Principal, string, string, json.RawMessage) bool { return false }
func (denyAll) AllowsAll(*auth.Principal, string) bool                       { return false }
