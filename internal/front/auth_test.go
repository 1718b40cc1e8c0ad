package front

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/conn"
)

// authServer serves server x, endpoints all (the default, at /mcp) and
// team, routed by path and by host under mcp.example.com, behind a.
func authServer(t *testing.T, a auth.Authenticator, cfg Config) (*Handler, *httptest.Server, []*fakeBackend) {
	t.Helper()
	x, all, team := newFakeBackend(), newFakeBackend(), newFakeBackend()
	cfg.Backends = map[string]conn.Backend{"x": x}
	cfg.Endpoints = map[string]conn.Backend{"all": all, "team": team}
	cfg.HostDomain = "mcp.example.com"
	cfg.Auth = a
	h, srv := routedServer(t, cfg)
	return h, srv, []*fakeBackend{x, all, team}
}

// rpcError decodes a JSON-RPC error body: its id (raw) and message.
func rpcError(t *testing.T, body string) (id, msg string) {
	t.Helper()
	var m struct {
		ID    json.RawMessage
		Error struct{ Message string }
	}
	if err := json.Unmarshal([]byte(body), &m); err != nil || m.Error.Message == "" {
		t.Fatalf("not a JSON-RPC error: %q", body)
	}
	return string(m.ID), m.Error.Message
}

// Every URL of every target, in both eras and every method, routed by
// path or by host, is refused without credentials before anything else:
// 401 with the challenge naming the target's metadata document (absolute,
// path-inserted; the same resource for /mcp, /sse and /messages, whose
// document is the /sse URL's: see TestAuthLegacySSEResource), a JSON-RPC
// error with id null, and nothing opened. A token without the
// scope gets 403 with its own challenge.
func TestAuthRefusesEveryURL(t *testing.T) {
	a := newFakeAuth()
	h, srv, backends := authServer(t, a, Config{})
	origin := srv.URL
	targets := []struct {
		prefix, host, resource, kind, name string
	}{
		{"/servers/x", "", origin + "/servers/x/mcp", "server", "x"},
		{"/endpoints/team", "", origin + "/endpoints/team/mcp", "endpoint", "team"},
		{"", "", origin + "/mcp", "endpoint", "all"},
		{"", "x.mcp.example.com", "http://x.mcp.example.com/mcp", "server", "x"},
		{"", "team.mcp.example.com", "http://team.mcp.example.com/mcp", "endpoint", "team"},
	}
	modern := modernBody("1", "tools/list", "")
	requests := []struct {
		what, method, path, body string
		hdr                      []string
		legacy                   bool // told the /sse URL's document
	}{
		{"initialize", http.MethodPost, "/mcp", initBody, nil, false},
		{"POST in a session", http.MethodPost, "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, []string{"Mcp-Session-Id", "nope"}, false},
		{"stateless POST", http.MethodPost, "/mcp", modern, []string{"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/list"}, false},
		{"legacy GET on /mcp", http.MethodGet, "/mcp", "", []string{"Accept", "text/event-stream"}, false},
		{"GET stream", http.MethodGet, "/mcp", "", []string{"Accept", "text/event-stream", "Mcp-Session-Id", "nope"}, false},
		{"GET resume", http.MethodGet, "/mcp", "", []string{"Accept", "text/event-stream", "Mcp-Session-Id", "nope", "Last-Event-ID", "1-1"}, false},
		{"DELETE", http.MethodDelete, "/mcp", "", []string{"Mcp-Session-Id", "nope"}, false},
		{"bad version", http.MethodGet, "/mcp", "", []string{"Accept", "text/event-stream", "Mcp-Session-Id", "nope", "Mcp-Protocol-Version", "1999-01-01"}, false},
		{"legacy GET /sse", http.MethodGet, "/sse", "", []string{"Accept", "text/event-stream"}, true},
		{"legacy reattach", http.MethodGet, "/sse", "", []string{"Accept", "text/event-stream", "Last-Event-ID", "abc.1"}, true},
		{"legacy POST /messages", http.MethodPost, "/messages?sessionId=abc", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, nil, true},
	}
	for _, tg := range targets {
		u, _ := url.Parse(tg.resource)
		alias := strings.TrimSuffix(tg.resource, "/mcp") + "/sse"
		for _, rq := range requests {
			wantMeta := u.Scheme + "://" + u.Host + wellKnownPRM + u.Path
			if rq.legacy {
				wantMeta = strings.TrimSuffix(wantMeta, "/mcp") + "/sse"
			}
			for _, cred := range []struct {
				token  string
				status int
			}{{"", http.StatusUnauthorized}, {"garbage", http.StatusUnauthorized}, {"reader", http.StatusForbidden}} {
				hdr := append([]string(nil), rq.hdr...)
				if tg.host != "" {
					hdr = append(hdr, "Host", tg.host)
				}
				if cred.token != "" {
					hdr = append(hdr, "Authorization", "Bearer "+cred.token)
				}
				resp, body := doHost(t, srv, rq.method, tg.prefix+rq.path, rq.body, hdr...)
				where := tg.prefix + rq.path + " " + tg.host + " " + rq.what + " token " + cred.token
				if resp.StatusCode != cred.status {
					t.Errorf("%s: %d %s, want %d", where, resp.StatusCode, body, cred.status)
					continue
				}
				challenge := resp.Header.Get("WWW-Authenticate")
				if !strings.Contains(challenge, `resource_metadata="`+wantMeta+`"`) {
					t.Errorf("%s: WWW-Authenticate %q, want resource_metadata %q", where, challenge, wantMeta)
				}
				if id, msg := rpcError(t, body); id != "null" || !strings.Contains(msg, "for "+tg.kind+" "+tg.name) {
					t.Errorf("%s: error id %s message %q", where, id, msg)
				}
				if got := a.lastTarget(); got.Resource != tg.resource || got.Metadata != wantMeta || got.Kind != tg.kind || got.Name != tg.name ||
					len(got.Aliases) != 1 || got.Aliases[0] != alias {
					t.Errorf("%s: target %+v, want resource %s", where, got, tg.resource)
				}
			}
		}
	}
	for i, b := range backends {
		if n := b.opens.Load(); n != 0 {
			t.Errorf("backend %d opened %d sessions for refused requests", i, n)
		}
	}
	if n := h.Sessions(); n != 0 {
		t.Errorf("%d sessions after refused requests", n)
	}
	// Origin is checked first: a foreign page learns not even that the
	// target wants credentials.
	resp, _ := do(t, srv, http.MethodPost, "/servers/x/mcp", initBody, "Origin", "https://evil.example")
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("WWW-Authenticate") != "" {
		t.Errorf("foreign origin: %d %q, want 403 without a challenge", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
}

// The metadata documents are served without credentials, to any origin
// (CORS), at the path-inserted well-known URL of each target's /mcp URL
// and of its /sse URL (whose resource is that URL), the default endpoint's
// also at the root, a host-routed target's on its host; 404 for targets
// unknown or not protected.
func TestAuthMetadataDocuments(t *testing.T) {
	a := newFakeAuth("endpoint/team")
	_, srv, _ := authServer(t, a, Config{})
	origin := srv.URL
	for _, tc := range []struct {
		path, host, resource string
	}{
		{"/servers/x/mcp", "", origin + "/servers/x/mcp"},
		{"/endpoints/all/mcp", "", origin + "/endpoints/all/mcp"},
		{"/mcp", "", origin + "/mcp"},
		{"", "", origin + "/mcp"},
		{"/mcp", "x.mcp.example.com", "http://x.mcp.example.com/mcp"},
		{"", "all.mcp.example.com", "http://all.mcp.example.com/mcp"},
		{"/servers/x/mcp", "x.mcp.example.com", "http://x.mcp.example.com/servers/x/mcp"},
		{"/servers/x/sse", "", origin + "/servers/x/sse"},
		{"/endpoints/all/sse/", "", origin + "/endpoints/all/sse"},
		{"/sse", "", origin + "/sse"},
		{"/sse", "x.mcp.example.com", "http://x.mcp.example.com/sse"},
	} {
		var hdr []string
		if tc.host != "" {
			hdr = []string{"Host", tc.host}
		}
		// A browser client on a foreign origin may read it.
		hdr = append(hdr, "Origin", "https://claude.ai")
		resp, body := doHost(t, srv, http.MethodGet, wellKnownPRM+tc.path, "", hdr...)
		var doc struct{ Resource string }
		if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &doc) != nil || doc.Resource != tc.resource {
			t.Errorf("GET %s%s on %q: %d %s, want resource %s", wellKnownPRM, tc.path, tc.host, resp.StatusCode, body, tc.resource)
		}
		if resp.Header.Get("Access-Control-Allow-Origin") != "*" || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("GET %s%s: headers %v", wellKnownPRM, tc.path, resp.Header)
		}
	}
	for _, path := range []string{
		"/servers/nope/mcp", "/endpoints/nope/mcp", "/endpoints/team/mcp", // unknown; not protected
		"/servers/nope/sse", "/endpoints/team/sse", "/servers/x", "/endpoints/all/messages", "/servers/x/messages",
	} {
		resp, body := do(t, srv, http.MethodGet, wellKnownPRM+path, "")
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s%s: %d %s, want 404", wellKnownPRM, path, resp.StatusCode, body)
		}
	}
	// A host-routed target that is not protected has none either.
	if resp, _ := doHost(t, srv, http.MethodGet, wellKnownPRM+"/mcp", "", "Host", "team.mcp.example.com"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unprotected host-routed target: %d", resp.StatusCode)
	}
	// A preflight (browser clients send MCP-Protocol-Version), and other methods.
	resp, _ := do(t, srv, http.MethodOptions, wellKnownPRM+"/servers/x/mcp", "",
		"Origin", "https://claude.ai", "Access-Control-Request-Method", "GET", "Access-Control-Request-Headers", "mcp-protocol-version")
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "*" ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Mcp-Protocol-Version") {
		t.Errorf("preflight: %d %v", resp.StatusCode, resp.Header)
	}
	if resp, _ := do(t, srv, http.MethodPost, wellKnownPRM+"/servers/x/mcp", "{}"); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST to a metadata document: %d", resp.StatusCode)
	}
	if resp, _ := do(t, srv, http.MethodHead, wellKnownPRM, ""); resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD of the root document: %d", resp.StatusCode)
	}
}

// Without Config.Auth nothing of this exists: the well-known URLs are
// unknown paths and requests need no credentials.
func TestNoAuthNoMetadata(t *testing.T) {
	_, srv, _ := authServer(t, nil, Config{})
	if resp, _ := do(t, srv, http.MethodGet, wellKnownPRM+"/servers/x/mcp", ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("metadata without auth: %d", resp.StatusCode)
	}
	if resp, _ := doHost(t, srv, http.MethodGet, wellKnownPRM, "", "Host", "x.mcp.example.com"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("host-routed metadata without auth: %d", resp.StatusCode)
	}
	initAt(t, srv, "/servers/x/mcp", "")
}

// The resource URL follows the client's view: the request's scheme and
// host, the first proxy's X-Forwarded-Proto and X-Forwarded-Host when
// trusted (ignored when not), Config.PublicURL over both; lower case,
// without a default port. A host that makes no URL is refused (400), in
// both the challenge and the document.
func TestAuthResourceURL(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     Config
		hdr     []string
		want    string // the resource of /servers/x/mcp; "" for 400
		wantDoc string // its metadata URL, when not the usual one
	}{
		{"request host", Config{}, []string{"Host", "GW.Example.com:8080"}, "http://gw.example.com:8080/servers/x/mcp", ""},
		{"default port dropped", Config{}, []string{"Host", "gw.example.com:80"}, "http://gw.example.com/servers/x/mcp", ""},
		{"IPv6", Config{}, []string{"Host", "[::1]:9"}, "http://[::1]:9/servers/x/mcp", ""},
		{"proxy headers ignored", Config{}, []string{"X-Forwarded-Host", "evil.example", "X-Forwarded-Proto", "https"}, "", ""},
		{"proxy headers trusted", Config{TrustProxyHeaders: true},
			[]string{"X-Forwarded-Host", "gw.example.com:443, inner:1", "X-Forwarded-Proto", "HTTPS, http"}, "https://gw.example.com/servers/x/mcp", ""},
		{"forwarded proto alone", Config{TrustProxyHeaders: true}, []string{"Host", "gw.example.com", "X-Forwarded-Proto", "https"}, "https://gw.example.com/servers/x/mcp", ""},
		{"bad forwarded host", Config{TrustProxyHeaders: true}, []string{"X-Forwarded-Host", `gw.example.com", x="y`}, "", ""},
		{"bad forwarded port", Config{TrustProxyHeaders: true}, []string{"X-Forwarded-Host", "gw.example.com:https"}, "", ""},
		{"bad host", Config{}, []string{"Host", "localhost:1,evil.example"}, "", ""},
		{"public URL", Config{PublicURL: "HTTPS://Public.Example.com:443/", TrustProxyHeaders: true},
			[]string{"X-Forwarded-Host", "other.example"}, "https://public.example.com/servers/x/mcp", ""},
		{"public URL with a path", Config{PublicURL: "https://public.example.com/gw/"}, nil,
			"https://public.example.com/gw/servers/x/mcp", "https://public.example.com" + wellKnownPRM + "/gw/servers/x/mcp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newFakeAuth()
			_, srv, _ := authServer(t, a, tc.cfg)
			want := tc.want
			if tc.name == "proxy headers ignored" {
				want = srv.URL + "/servers/x/mcp"
			}
			resp, body := doHost(t, srv, http.MethodPost, "/servers/x/mcp", initBody, tc.hdr...)
			if want == "" {
				if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("WWW-Authenticate") != "" {
					t.Fatalf("%d %q %s, want 400 without a challenge", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
				}
				if resp, _ := doHost(t, srv, http.MethodGet, wellKnownPRM+"/servers/x/mcp", "", tc.hdr...); resp.StatusCode != http.StatusBadRequest {
					t.Errorf("metadata: %d, want 400", resp.StatusCode)
				}
				return
			}
			got := a.lastTarget()
			wantDoc := tc.wantDoc
			if wantDoc == "" {
				u, _ := url.Parse(want)
				wantDoc = u.Scheme + "://" + u.Host + wellKnownPRM + u.Path
			}
			if resp.StatusCode != http.StatusUnauthorized || got.Resource != want || got.Metadata != wantDoc {
				t.Fatalf("%d: resource %q metadata %q, want %q %q", resp.StatusCode, got.Resource, got.Metadata, want, wantDoc)
			}
			resp, body = doHost(t, srv, http.MethodGet, wellKnownPRM+"/servers/x/mcp", "", tc.hdr...)
			if !strings.Contains(body, `"resource":"`+want+`"`) {
				t.Errorf("metadata document %d %s, want resource %s", resp.StatusCode, body, want)
			}
		})
	}
}

// A target the Authenticator does not protect is served as without auth:
// no credentials needed, its sessions usable by anyone without them. A
// session opened with credentials there is that principal's.
func TestAuthOpenTarget(t *testing.T) {
	a := newFakeAuth("server/x")
	_, srv, backends := authServer(t, a, Config{})
	sid := initAt(t, srv, "/servers/x/mcp", "")
	ping := `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	if resp, body := do(t, srv, http.MethodPost, "/servers/x/mcp", ping, "Mcp-Session-Id", sid); resp.StatusCode != http.StatusOK {
		t.Fatalf("anonymous session: %d %s", resp.StatusCode, body)
	}
	resp, body := do(t, srv, http.MethodPost, "/servers/x/mcp", initBody, "Authorization", "Bearer alice")
	owned := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || owned == "" {
		t.Fatalf("initialize with credentials: %d %s", resp.StatusCode, body)
	}
	if resp, _ := do(t, srv, http.MethodPost, "/servers/x/mcp", ping, "Mcp-Session-Id", owned); resp.StatusCode != http.StatusNotFound {
		t.Errorf("alice's session without credentials: %d, want 404", resp.StatusCode)
	}
	if resp, _ := do(t, srv, http.MethodPost, "/servers/x/mcp", ping, "Mcp-Session-Id", owned, "Authorization", "Bearer alice"); resp.StatusCode != http.StatusOK {
		t.Errorf("alice's session with hers: %d", resp.StatusCode)
	}
	if n := backends[0].opens.Load(); n != 2 {
		t.Errorf("%d sessions opened, want 2", n)
	}
}

// A legacy client (the TypeScript SDK's SSEClientTransport: Claude Code's
// and mcp-remote's SSE transport, the Inspector's) checks that the metadata
// document's resource is the URL it connects to or a parent of it, and
// failed before asking for a token while every 401 named the /mcp URL's
// document ("Protected resource .../servers/x/mcp does not match expected
// .../servers/x/sse"). A request on /sse or /messages is told the /sse URL's
// document, whose resource is the /sse URL; every request of the target
// accepts that URL as an audience (Target.Aliases) besides its /mcp URL.
func TestAuthLegacySSEResource(t *testing.T) {
	const origin = "https://public.example.com"
	for _, tc := range []struct {
		method, path, doc string
		hdr               []string
		resource, alias   string
	}{
		{http.MethodGet, "/servers/x/sse", "/gw/servers/x/sse", []string{"Accept", "text/event-stream"}, "/gw/servers/x/mcp", "/gw/servers/x/sse"},
		{http.MethodPost, "/servers/x/messages?sessionId=s", "/gw/servers/x/sse", []string{"Content-Type", "application/json"}, "/gw/servers/x/mcp", "/gw/servers/x/sse"},
		{http.MethodGet, "/endpoints/team/sse", "/gw/endpoints/team/sse", []string{"Accept", "text/event-stream"}, "/gw/endpoints/team/mcp", "/gw/endpoints/team/sse"},
		{http.MethodGet, "/sse", "/gw/sse", []string{"Accept", "text/event-stream"}, "/gw/mcp", "/gw/sse"},
		{http.MethodPost, "/messages?sessionId=s", "/gw/sse", []string{"Content-Type", "application/json"}, "/gw/mcp", "/gw/sse"},
		// Streamable HTTP, and a GET falling back to SSE on the /mcp URL (whose
		// client checks against that URL), keep the /mcp URL's document.
		{http.MethodPost, "/servers/x/mcp", "/gw/servers/x/mcp", nil, "/gw/servers/x/mcp", "/gw/servers/x/sse"},
		{http.MethodGet, "/servers/x/mcp", "/gw/servers/x/mcp", []string{"Accept", "text/event-stream"}, "/gw/servers/x/mcp", "/gw/servers/x/sse"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			a := newFakeAuth()
			_, srv, _ := authServer(t, a, Config{PublicURL: origin + "/gw"})
			resp, body := doHost(t, srv, tc.method, tc.path, initBody, tc.hdr...)
			got := a.lastTarget()
			wantDoc := origin + wellKnownPRM + tc.doc
			if resp.StatusCode != http.StatusUnauthorized || got.Metadata != wantDoc || got.Resource != origin+tc.resource ||
				len(got.Aliases) != 1 || got.Aliases[0] != origin+tc.alias {
				t.Fatalf("%d %s: target %+v, want metadata %s, resource %s, alias %s", resp.StatusCode, body, got, wantDoc, origin+tc.resource, origin+tc.alias)
			}
			if ch := resp.Header.Get("WWW-Authenticate"); !strings.Contains(ch, `resource_metadata="`+wantDoc+`"`) {
				t.Errorf("challenge %q, want the metadata %s", ch, wantDoc)
			}
			// The document names the URL the client connects to.
			docPath := strings.TrimPrefix(tc.doc, "/gw")
			resp, body = doHost(t, srv, http.MethodGet, wellKnownPRM+docPath, "")
			wantRes := origin + tc.alias
			if !strings.HasSuffix(tc.doc, "/sse") {
				wantRes = origin + tc.resource
			}
			if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"resource":"`+wantRes+`"`) {
				t.Errorf("document at %s: %d %s, want resource %s", wellKnownPRM+docPath, resp.StatusCode, body, wantRes)
			}
		})
	}
}
