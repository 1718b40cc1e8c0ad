package authserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/mcpgate/mcpgate/internal/config"
)

// docHost is a document server for tests: a TLS server on loopback that
// the registry reaches as https://example.com:PORT (the name its
// certificate has), through a lookup that answers example.com with the
// server's address and the fence's test option letting exactly that
// address through.
type docHost struct {
	srv  *httptest.Server
	url  string // https://example.com:PORT
	hits atomic.Int32

	mu     sync.Mutex
	handle func(w http.ResponseWriter, r *http.Request)
}

func newDocHost(t *testing.T) *docHost {
	t.Helper()
	docHostLeakCheck(t)
	h := &docHost{}
	h.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.hits.Add(1)
		h.mu.Lock()
		handle := h.handle
		h.mu.Unlock()
		handle(w, r)
	}))
	t.Cleanup(h.srv.Close)
	h.url = "https://example.com:" + h.srv.URL[strings.LastIndexByte(h.srv.URL, ':')+1:]
	return h
}

// docHostLeakCheck checks, once the test and its cleanups are done (it is
// registered before them, so it runs after them), that no goroutine it
// started is left: no fetch, connection or waiter outlives its caller.
func docHostLeakCheck(t *testing.T) {
	current := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, current) })
}

func (h *docHost) serve(handle func(w http.ResponseWriter, r *http.Request)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.handle = handle
}

// serveDocument serves doc (with %s replaced by the document's own URL)
// at every path, with Cache-Control cc.
func (h *docHost) serveDocument(doc, cc string) {
	h.serve(func(w http.ResponseWriter, r *http.Request) {
		if cc != "" {
			w.Header().Set("Cache-Control", cc)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, doc, h.url+r.URL.RequestURI())
	})
}

func (h *docHost) addrPort() netip.AddrPort {
	return netip.MustParseAddrPort(h.srv.Listener.Addr().String())
}

// trustDocHosts points s's document fetcher at hosts: example.com resolves to the
// first one's address, each one's certificate is trusted, and exactly
// their addresses pass the fence.
func trustDocHosts(s *Server, hosts ...*docHost) {
	f := s.clients.docs.fetch
	pool := x509.NewCertPool()
	allowed := map[netip.AddrPort]bool{}
	for _, h := range hosts {
		pool.AddCert(h.srv.Certificate())
		allowed[h.addrPort()] = true
	}
	f.transport.TLSClientConfig = &tls.Config{RootCAs: pool}
	f.allowDial = func(ap netip.AddrPort) bool { return allowed[ap] }
	first := hosts[0].addrPort().Addr()
	f.lookup = func(_ context.Context, host string) ([]netip.Addr, error) {
		if host == "example.com" {
			return []netip.Addr{first}, nil
		}
		return nil, fmt.Errorf("no such host %s", host)
	}
}

const testDocument = `{"client_id":%q,"client_name":"Doc Client","client_uri":"https://example.com",
	"redirect_uris":["http://127.0.0.1:6274/callback","https://claude.ai/api/mcp/auth_callback"],
	"grant_types":["authorization_code","refresh_token"],"token_endpoint_auth_method":"none","logo_uri":"https://example.com/l.png"}`

func TestClientFromDocument(t *testing.T) {
	clock := newClientsClock()
	s := newClientsServer(t, clock, nil)
	h := newDocHost(t)
	trustDocHosts(s, h)
	h.serveDocument(testDocument, "public, max-age=600")
	ctx := context.Background()
	id := h.url + "/oauth/client.json"
	c, err := s.clients.client(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != id || !c.Document || c.Name != "Doc Client" || c.AuthMethod != clientAuthNone || len(c.RedirectURIs) != 2 ||
		c.URI != "https://example.com" || !c.Expires.Equal(clock.Now().Add(10*time.Minute)) || c.SecretHash != (Hash{}) {
		t.Fatalf("client %+v", c)
	}
	if got := documentHome(id, "https://claude.ai"); got != h.url {
		t.Errorf("a document on %s claiming client_uri https://claude.ai shows home %q", h.url, got)
	}
	if !registeredRedirect(c.RedirectURIs, "http://127.0.0.1:50123/callback") {
		t.Error("the document's loopback redirect does not match on another port")
	}
	// Cached while fresh: no second fetch.
	clock.Advance(9 * time.Minute)
	if _, err := s.clients.client(ctx, id); err != nil || h.hits.Load() != 1 {
		t.Fatalf("second ask within max-age: %v, %d fetches", err, h.hits.Load())
	}
	// Expired: fetched again, and the new document wins.
	clock.Advance(2 * time.Minute)
	h.serveDocument(strings.Replace(testDocument, "Doc Client", "Renamed", 1), "")
	c, err = s.clients.client(ctx, id)
	if err != nil || h.hits.Load() != 2 || c.Name != "Renamed" || !c.Expires.Equal(clock.Now().Add(defaultDocTTL)) {
		t.Fatalf("after expiry: %+v, %v, %d fetches", c, err, h.hits.Load())
	}
	cs, _ := s.store.Clients(ctx)
	if len(cs) != 1 || !cs[0].CreatedAt.Equal(clientsTestStart) {
		t.Errorf("store after a refresh: %d clients, %+v", len(cs), cs)
	}
}

func TestClientDocumentsOff(t *testing.T) {
	s := newClientsServer(t, newClientsClock(), func(c *config.AuthServer) { c.ClientMetadataDocuments = false })
	h := newDocHost(t)
	trustDocHosts(s, h)
	h.serveDocument(testDocument, "")
	if _, err := s.clients.client(context.Background(), h.url+"/c.json"); !errors.Is(err, ErrNotFound) || errors.Is(err, ErrClientDocument) {
		t.Fatalf("documents off: %v, want plain ErrNotFound", err)
	}
	if h.hits.Load() != 0 {
		t.Error("fetched a document with documents off")
	}
}

func TestClientDocumentRefusals(t *testing.T) {
	big := `{"client_id":%q,"client_name":"` + strings.Repeat("x", maxDocument) + `"}`
	for _, tc := range []struct {
		name, doc, want string
		status          int
	}{
		{"client_id of another URL", `{"client_id":"https://example.com/other.json","client_name":"A","redirect_uris":["http://127.0.0.1/cb"]}%.0s`, "client_id", 200},
		{"no client_id", `{"client_name":"A","redirect_uris":["http://127.0.0.1/cb"]}%.0s`, "client_id", 200},
		{"redirect outside the policy", `{"client_id":%q,"client_name":"A","redirect_uris":["https://evil.com/cb"]}`, "redirect_uris[0]", 200},
		{"shared secret", `{"client_id":%q,"client_name":"A","redirect_uris":["http://127.0.0.1/cb"],"token_endpoint_auth_method":"client_secret_post"}`, "token_endpoint_auth_method", 200},
		{"no name", `{"client_id":%q,"redirect_uris":["http://127.0.0.1/cb"]}`, "client_name", 200},
		{"not JSON", `<html>%s</html>`, "JSON", 200},
		{"too large", big, "larger than", 200},
		{"not found", `{"client_id":%q}`, "404", 404},
		{"not modified", `{"client_id":%q}`, "304", 304},
		{"created", testDocument, "201", 201},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newClientsServer(t, newClientsClock(), nil)
			h := newDocHost(t)
			trustDocHosts(s, h)
			h.serve(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				fmt.Fprintf(w, tc.doc, h.url+r.URL.Path)
			})
			id := h.url + "/c.json"
			for range 2 {
				_, err := s.clients.client(context.Background(), id)
				if !errors.Is(err, ErrClientDocument) || !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %v, want a refused document naming %q", err, tc.want)
				}
			}
			if h.hits.Load() != 2 {
				t.Errorf("%d fetches for two asks: a refusal was cached", h.hits.Load())
			}
			if cs, _ := s.store.Clients(context.Background()); len(cs) != 0 {
				t.Errorf("a refused document was stored: %+v", cs[0])
			}
		})
	}
}

func TestClientDocumentURLRules(t *testing.T) {
	s := newClientsServer(t, newClientsClock(), nil)
	var lookups atomic.Int32
	s.clients.docs.fetch.lookup = func(context.Context, string) ([]netip.Addr, error) {
		lookups.Add(1)
		return nil, errors.New("no")
	}
	for _, id := range []string{
		"https://example.com",
		"https://example.com/",
		"https://example.com/a/../c.json",
		"https://example.com/a/./c.json",
		"https://example.com/a/%2e%2e/c.json",
		"https://example.com/c.json#x",
		"https://user@example.com/c.json",
		"https://user:pw@example.com/c.json",
		"https://exa%6dple.com/c.json",
		"https://example.com/c json",
		"https://example.com/c\\json",
		"HTTPS://example.com/c.json", // compared as a string with client_id: the scheme as the draft writes it
		"https://" + strings.Repeat("a", maxRedirectURILen) + ".com/c.json",
	} {
		_, err := s.clients.client(context.Background(), id)
		if !errors.Is(err, ErrClientDocument) {
			t.Errorf("%q: %v, want a refused document", id, err)
		}
	}
	if lookups.Load() != 0 {
		t.Errorf("%d lookups for URLs refused on sight", lookups.Load())
	}
	// Not an https URL: not a document, just an unknown client.
	for _, id := range []string{"http://example.com/c.json", "example.com/c.json", "https://"} {
		if _, err := s.clients.client(context.Background(), id); !errors.Is(err, ErrNotFound) || errors.Is(err, ErrClientDocument) {
			t.Errorf("%q: %v, want plain ErrNotFound", id, err)
		}
	}
}

// TestClientDocumentOneFetchPerURL: however many asks arrive while a
// document is being fetched, it is fetched once.
func TestClientDocumentOneFetchPerURL(t *testing.T) {
	s := newClientsServer(t, newClientsClock(), nil)
	h := newDocHost(t)
	trustDocHosts(s, h)
	entered, release := make(chan struct{}), make(chan struct{})
	var inHandler, most atomic.Int32
	h.serve(func(w http.ResponseWriter, r *http.Request) {
		n := inHandler.Add(1)
		defer inHandler.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
		fmt.Fprintf(w, testDocument, h.url+r.URL.Path)
	})
	id := h.url + "/c.json"
	const callers = 16
	errs := make(chan error, callers)
	for range callers {
		go func() {
			c, err := s.clients.client(context.Background(), id)
			if err == nil && c.ID != id {
				err = fmt.Errorf("got client %q", c.ID)
			}
			errs <- err
		}()
	}
	<-entered
	close(release)
	for range callers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if h.hits.Load() != 1 || most.Load() != 1 {
		t.Errorf("%d fetches (%d at once), want 1", h.hits.Load(), most.Load())
	}
}

func TestClientDocumentNoRedirects(t *testing.T) {
	s := newClientsServer(t, newClientsClock(), nil)
	h, target := newDocHost(t), newDocHost(t)
	trustDocHosts(s, h, target)
	target.serveDocument(testDocument, "")
	for _, to := range []string{target.srv.URL + "/c.json", "http://169.254.169.254/latest/meta-data/", "https://[::1]/c.json"} {
		h.serve(func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, to, http.StatusFound) })
		_, err := s.clients.client(context.Background(), h.url+"/c.json")
		if !errors.Is(err, ErrClientDocument) || !strings.Contains(err.Error(), "302") {
			t.Errorf("redirect to %s: %v, want a refusal naming the 302", to, err)
		}
	}
	if target.hits.Load() != 0 {
		t.Error("a redirect was followed")
	}
}

func TestClientDocumentTimeout(t *testing.T) {
	s := newClientsServer(t, newClientsClock(), nil)
	h := newDocHost(t)
	trustDocHosts(s, h)
	s.clients.docs.fetch.timeout = 100 * time.Millisecond
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) }) // before the server closes: Close waits for this handler
	h.serve(func(w http.ResponseWriter, r *http.Request) { <-stop })
	_, err := s.clients.client(context.Background(), h.url+"/c.json")
	if !errors.Is(err, ErrClientDocument) || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("a server that never answers: %v", err)
	}
}

func TestClientDocumentFetchesBounded(t *testing.T) {
	s := newClientsServer(t, newClientsClock(), nil)
	h := newDocHost(t)
	trustDocHosts(s, h)
	h.serveDocument(testDocument, "")
	f := s.clients.docs.fetch
	for range cap(f.slots) {
		f.slots <- struct{}{}
	}
	_, err := s.clients.client(context.Background(), h.url+"/c.json")
	if !errors.Is(err, ErrClientDocument) || !strings.Contains(err.Error(), errFetchBusy.Error()) || h.hits.Load() != 0 {
		t.Fatalf("all fetch slots taken: %v, %d fetches", err, h.hits.Load())
	}
	<-f.slots
	if _, err := s.clients.client(context.Background(), h.url+"/c.json"); err != nil {
		t.Fatalf("a slot free: %v", err)
	}
}

func TestCacheTTL(t *testing.T) {
	for _, tc := range []struct {
		header string
		want   time.Duration
	}{
		{"", defaultDocTTL},
		{"public", defaultDocTTL},
		{"max-age=600", 10 * time.Minute},
		{"public, max-age=3000", 50 * time.Minute},
		{`max-age="600"`, 10 * time.Minute},
		{"MAX-AGE=600", 10 * time.Minute},
		{"max-age=0", minDocTTL},
		{"max-age=10", minDocTTL},
		{"max-age=99999999999999999999", maxDocTTL},
		{"max-age=604800", maxDocTTL},
		{"max-age=-5", minDocTTL},
		{"max-age=abc", minDocTTL},
		{"max-age=600, no-store", minDocTTL},
		{"no-cache", minDocTTL},
		{"private, max-age=7200", 2 * time.Hour},
	} {
		if got := cacheTTL(tc.header); got != tc.want {
			t.Errorf("cacheTTL(%q) = %v, want %v", tc.header, got, tc.want)
		}
	}
}

func FuzzCacheTTL(f *testing.F) {
	for _, s := range []string{"", "max-age=600", `public, max-age="1"`, "no-store", "max-age=1e9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		if got := cacheTTL(header); got < minDocTTL || got > maxDocTTL {
			t.Fatalf("cacheTTL(%q) = %v, outside [%v, %v]", header, got, minDocTTL, maxDocTTL)
		}
	})
}
