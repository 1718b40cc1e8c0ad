package servers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mcpgate/mcpgate/internal/auth"
	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/echoserver"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// credUpstream is a remote MCP server (the echo server) that checks the
// credentials of every request it gets: its Authorization must be the
// token of the principal named in X-User, a tools/call's message must be
// that principal's, and an upstream session must serve one principal.
// sessionEra: it refuses requests without a session (but initialize), so
// that stateless requests are translated.
type credUpstream struct {
	ts *httptest.Server

	mu sync.Mutex
	// guarded by mu:
	users   map[string]string // Mcp-Session-Id -> the X-User of its first request
	crossed []string
	seen    map[string]int // X-User -> requests
}

func newCredUpstream(t *testing.T, sessionEra bool) *credUpstream {
	echo := echoserver.NewHandler()
	u := &credUpstream{users: map[string]string{}, seen: map[string]int{}}
	u.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		user, sid := r.Header.Get("X-User"), r.Header.Get("Mcp-Session-Id")
		u.mu.Lock()
		u.seen[user]++
		if got := r.Header.Get("Authorization"); got != "Bearer tok-"+user+"-SECRET" || r.Header.Get("X-Static") != "s" {
			u.crossed = append(u.crossed, fmt.Sprintf("request of %q has the wrong credentials", user))
		}
		if _, msg, ok := bytes.Cut(body, []byte(`"message":"`)); ok && !bytes.HasPrefix(msg, []byte(user+"-")) {
			u.crossed = append(u.crossed, fmt.Sprintf("request of %q carries another's message", user))
		}
		if sid != "" {
			if first, ok := u.users[sid]; !ok {
				u.users[sid] = user
			} else if first != user {
				u.crossed = append(u.crossed, fmt.Sprintf("session of %q used by %q", first, user))
			}
		}
		u.mu.Unlock()
		if sessionEra && r.Method == http.MethodPost && sid == "" && !bytes.Contains(body, []byte(`"initialize"`)) {
			http.Error(w, "Bad Request: missing session ID", http.StatusBadRequest)
			return
		}
		echo.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		echo.Close()
		u.ts.CloseClientConnections()
		u.ts.Close()
	})
	return u
}

func (u *credUpstream) check(t *testing.T) {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, c := range u.crossed {
		t.Error(c)
	}
	if u.seen["alice"] == 0 || u.seen["bob"] == 0 || len(u.seen) != 2 {
		t.Errorf("upstream requests by X-User: %v, want alice's and bob's only", u.seen)
	}
}

// credServer is a remote server with per-principal headers over static
// ones; its logs, at debug level, go to logs.
func credServer(t *testing.T, url string) (*remoteServer, *testkit.SyncBuffer) {
	t.Helper()
	cfg := testServer("github")
	cfg.Type, cfg.URL = config.TypeHTTP, url
	cfg.Headers = map[string]string{"authorization": "Bearer static-SECRET", "X-Static": "s"}
	cfg.PrincipalHeaders = map[string]config.Template{}
	for name, text := range map[string]string{"Authorization": "Bearer {{secret.github_token}}", "X-User": "{{principal}}"} {
		tm, err := config.ParseTemplate(text)
		if err != nil {
			t.Fatal(err)
		}
		cfg.PrincipalHeaders[name] = tm
	}
	cfg.Secrets = config.NewSecrets("secrets.json", map[string]map[string]string{
		"alice": {"github_token": "tok-alice-SECRET"},
		"bob":   {"github_token": "tok-bob-SECRET"},
		"carol": {"other": "tok-carol-SECRET"},
	})
	logs := &testkit.SyncBuffer{}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(logs, testkit.LogWriter{T: t}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := New(cfg, "test", log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s.(*remoteServer), logs
}

func as(name string) context.Context {
	if name == "" {
		return context.Background()
	}
	return conn.WithPrincipal(context.Background(), &auth.Principal{Name: name, Kind: auth.KindKey})
}

func checkNoSecretLogged(t *testing.T, logs *testkit.SyncBuffer) {
	t.Helper()
	if text := logs.String(); strings.Contains(text, "SECRET") {
		t.Errorf("a secret was logged:\n%s", text)
	}
}

// TestPrincipalHeadersRefusals: a principal whose headers cannot be filled
// is refused when its session or stateless request opens, with an error
// naming the server, the header and the secret, never a value; no request
// reaches the remote for it.
func TestPrincipalHeadersRefusals(t *testing.T) {
	up := newCredUpstream(t, false)
	s, logs := credServer(t, up.ts.URL+"/mcp")
	cases := []struct{ principal, want string }{
		{"", `mcpgate: server "github" needs an authenticated principal (its header "Authorization" is per principal)`},
		{"carol", `mcpgate: server "github" needs secret "github_token" for principal "carol" (header "Authorization", gateway.secretsFile)`},
		{"dave", `mcpgate: server "github" needs secret "github_token" for principal "dave" (header "Authorization", gateway.secretsFile)`},
	}
	for _, c := range cases {
		_, err := s.Open(as(c.principal), newStream())
		if err == nil || err.Error() != c.want || !errors.Is(err, config.ErrNoCredential) {
			t.Errorf("Open for %q: %v,\n want %s", c.principal, err, c.want)
		}
		_, err = s.OpenStateless(as(c.principal), newRecording(), "2026-07-28", []byte("{}"))
		if err == nil || err.Error() != c.want {
			t.Errorf("OpenStateless for %q: %v,\n want %s", c.principal, err, c.want)
		}
		if _, err := StatelessSession(s, s.log)(as(c.principal), newStream(), []byte("{}")); err == nil || err.Error() != c.want {
			t.Errorf("StatelessSession for %q: %v,\n want %s", c.principal, err, c.want)
		}
	}
	up.mu.Lock()
	if len(up.seen) != 0 {
		t.Errorf("refused principals reached the remote: %v", up.seen)
	}
	up.mu.Unlock()
	if n := s.isolated.Pending(); n != 0 {
		t.Errorf("%d pending", n)
	}
	checkNoSecretLogged(t, logs)
}

// callMsg is a tools/call of echo with message.
func callMsg(id int, message string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"message":%q}}}`, id, message)
}

// principalsInParallel runs n rounds of each of alice and bob at once:
// a session (initialize, a call, close) and a stateless request.
func principalsInParallel(t *testing.T, s *remoteServer, n int) {
	var wg sync.WaitGroup
	for i := range n {
		for _, who := range []string{"alice", "bob"} {
			wg.Go(func() {
				c, err := s.Open(as(who), newStream())
				if err != nil {
					t.Errorf("Open for %s: %v", who, err)
					return
				}
				defer c.Close()
				initialized(t, c)
				out := newStream()
				msg := fmt.Sprintf("%s-session-%d", who, i)
				handle(t, c, callMsg(2, msg), out)
				if got := string(out.next(t)); toolText(got) != msg {
					t.Errorf("session call of %s: %s", who, got)
				}
			})
			wg.Go(func() {
				c, err := s.OpenStateless(as(who), newRecording(), "2026-07-28", []byte("{}"))
				if err != nil {
					t.Errorf("OpenStateless for %s: %v", who, err)
					return
				}
				defer c.Close()
				out := newRecording()
				msg := fmt.Sprintf("%s-stateless-%d", who, i)
				raw := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"message":%q},%s}}`,
					i, msg, remoteMeta)
				handleMsg(t, c, raw, out)
				if got := out.reply(t); toolText(got) != msg {
					t.Errorf("stateless call of %s: %s", who, got)
				}
			})
		}
	}
	wg.Wait()
}

// TestPrincipalHeadersModernNoCrossing: alice's and bob's sessions and
// stateless requests (passed through: the remote speaks 2026-07-28), many
// at once, each reach the remote with their own principal's token over
// the static headers, never another's.
func TestPrincipalHeadersModernNoCrossing(t *testing.T) {
	up := newCredUpstream(t, false)
	s, logs := credServer(t, up.ts.URL+"/mcp")
	principalsInParallel(t, s, 20)
	up.check(t)
	checkNoSecretLogged(t, logs)
}

// TestPrincipalHeadersTranslatedNoCrossing: for a remote of the session
// eras, the stateless requests are translated through upstream sessions
// keyed by principal: alice's and bob's never share one, and each carries
// its principal's token.
func TestPrincipalHeadersTranslatedNoCrossing(t *testing.T) {
	up := newCredUpstream(t, true)
	s, logs := credServer(t, up.ts.URL+"/mcp")
	principalsInParallel(t, s, 20)
	up.check(t)
	s.trans.mu.Lock()
	creds := map[string]bool{}
	for _, tp := range s.trans.procs {
		creds[tp.cred] = true
		if tp.cred == "" || strings.Contains(tp.cred, "SECRET") {
			t.Errorf("translation process keyed %q", tp.cred)
		}
	}
	s.trans.mu.Unlock()
	if len(creds) != 2 {
		t.Errorf("translation processes of %d credentials, want 2", len(creds))
	}
	checkNoSecretLogged(t, logs)
}
