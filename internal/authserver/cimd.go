package authserver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Client ID metadata documents (MCP 2025-11-25 authorization, "Client ID
// Metadata Documents"; draft-ietf-oauth-client-id-metadata-document): a
// client with no registration here names itself by an https URL, and that
// URL serves its metadata. We fetch it when the provider first asks for
// the client (fetch.go fences the fetch in), check it like a registration
// (clientmeta.go), and keep it in the Store as a Client with Document set
// until its cache lifetime passes; then the next ask fetches it again.
// Errors and invalid documents are not cached (the draft's 5.2).

// Cache lifetime bounds: Cache-Control is honoured between them (the
// draft lets the server bound it). The floor keeps a client that says
// no-store from costing a fetch per request; the ceiling keeps a
// changed document (a removed redirect URI) from being ignored for long.
const (
	minDocTTL     = 5 * time.Minute
	defaultDocTTL = time.Hour
	maxDocTTL     = 24 * time.Hour
)

// ErrClientDocument is wrapped by every refusal of a client ID metadata
// document (not fetched, not 200, too large, not valid, or not at a
// public address). Such an error also matches ErrNotFound: for the
// provider the client does not exist (invalid_client, and no redirect to
// a redirect URI it cannot trust).
var ErrClientDocument = errors.New("authserver: client metadata document refused")

type documentError struct {
	url    string
	reason string
}

func (e *documentError) Error() string {
	return fmt.Sprintf("authserver: client metadata document %s: %s", e.url, e.reason)
}

func (e *documentError) Unwrap() []error { return []error{ErrClientDocument, ErrNotFound} }

// documentURL reports whether id is meant as a client ID metadata
// document's URL: it is an https URL. Whether it is an acceptable one is
// checkDocumentURL's to say.
func documentURL(id string) bool {
	return len(id) > len("https://") && strings.EqualFold(id[:len("https://")], "https://")
}

// checkDocumentURL applies the draft's rules for a client identifier URL
// (section 3): https, a host, a path other than "/", no dot segments
// (encoded or not), no fragment, no userinfo. It is compared as a string
// with the document's client_id, so it is not normalised.
func checkDocumentURL(id string) error {
	if len(id) > maxRedirectURILen {
		return fmt.Errorf("longer than %d bytes", maxRedirectURILen)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c >= 0x7f || c == '\\' {
			return fmt.Errorf("byte %#x is not allowed", c)
		}
	}
	u, err := url.Parse(id)
	switch {
	case err != nil || u.Opaque != "":
		return errors.New("not a URL")
	case !strings.HasPrefix(id, "https://"):
		return errors.New("not https (written in lower case: it is compared as a string)")
	case u.User != nil:
		return errors.New("has userinfo")
	case u.Fragment != "" || strings.IndexByte(id, '#') >= 0:
		return errors.New("has a fragment")
	case u.Host == "" || strings.IndexByte(u.Host, '%') >= 0:
		return errors.New("no plain host")
	case u.EscapedPath() == "" || u.EscapedPath() == "/":
		return errors.New("no path")
	}
	for _, seg := range strings.Split(u.Path, "/") { // u.Path is decoded: %2e%2e is ".." here
		if seg == "." || seg == ".." {
			return errors.New("dot segment in the path")
		}
	}
	return nil
}

// documents keeps the fetches in progress, so that one URL is fetched at
// a time however many requests name it at once.
type documents struct {
	r     *clientRegistry
	fetch *docFetcher

	mu       sync.Mutex // guards inflight
	inflight map[string]*docCall
}

// docCall is one fetch of a URL; waiters share its outcome.
type docCall struct {
	done chan struct{}
	c    *Client
	err  error
}

func newDocuments(r *clientRegistry) *documents {
	return &documents{r: r, fetch: newDocFetcher(), inflight: map[string]*docCall{}}
}

// client returns the client of document URL id: the Store's copy while
// it is fresh, else a new fetch (shared with any other caller fetching
// it now).
func (d *documents) client(ctx context.Context, id string) (*Client, error) {
	if c, err := d.stored(ctx, id); c != nil || err != nil {
		return c, err
	}
	d.mu.Lock()
	call, ok := d.inflight[id]
	if !ok {
		call = &docCall{done: make(chan struct{})}
		d.inflight[id] = call
	}
	d.mu.Unlock()
	if ok {
		select {
		case <-call.done:
			if call.err != nil {
				return nil, call.err
			}
			return cloneClient(call.c), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	// The fetch outlives a caller that gives up: the others wait on it.
	call.c, call.err = d.lead(context.WithoutCancel(ctx), id)
	d.mu.Lock()
	delete(d.inflight, id)
	d.mu.Unlock()
	close(call.done)
	if call.err != nil {
		return nil, call.err
	}
	return cloneClient(call.c), nil
}

// lead is the one fetch of id in progress. It looks in the Store again
// first: a fetch that ended between our first look and our taking the
// lead has stored a fresh copy, which saves a second fetch.
func (d *documents) lead(ctx context.Context, id string) (*Client, error) {
	if c, err := d.stored(ctx, id); c != nil || err != nil {
		return c, err
	}
	return d.load(ctx, id)
}

// stored returns the Store's client of id unless it is missing or an
// expired document (then nil, nil).
func (d *documents) stored(ctx context.Context, id string) (*Client, error) {
	c, err := d.r.s.store.Client(ctx, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	case c.Document && !d.r.s.deps.Now().Before(c.Expires):
		return nil, nil
	}
	return c, nil
}

// load fetches, checks and stores the document at id. A refreshed
// document keeps its creation time (the order pruning goes by).
func (d *documents) load(ctx context.Context, id string) (*Client, error) {
	refuse := func(reason string) error { return &documentError{url: id, reason: reason} }
	if err := checkDocumentURL(id); err != nil {
		return nil, refuse(err.Error())
	}
	body, cacheControl, err := d.fetch.fetch(ctx, id)
	if err != nil {
		d.r.s.deps.Logger.Info("authserver: client metadata document not fetched", "url", id, "err", err)
		switch {
		case errors.Is(err, errBlockedAddress), errors.Is(err, errFetchBusy), errors.Is(err, errBadAnswer):
			return nil, refuse(err.Error())
		case errors.Is(err, context.DeadlineExceeded):
			return nil, refuse("fetch timed out")
		}
		return nil, refuse("fetch failed")
	}
	m, err := decodeMetadata(body)
	if err != nil {
		return nil, refuse(err.Error())
	}
	if m.ClientID != id {
		return nil, refuse("its client_id is not its URL")
	}
	c, err := m.toClient(d.r.policy, true)
	if err != nil {
		return nil, refuse(err.Error())
	}
	c.URI = documentHome(id, c.URI)
	now := d.r.s.deps.Now()
	c.ID, c.Document, c.CreatedAt, c.Expires = id, true, now, now.Add(cacheTTL(cacheControl))
	if old, err := d.r.s.store.Client(ctx, id); err == nil {
		c.CreatedAt = old.CreatedAt
	}
	if err := d.r.admit(ctx, c); errors.Is(err, errClientsFull) {
		return nil, refuse("no room for another client")
	} else if err != nil {
		return nil, err
	}
	return c, nil
}

// documentHome is the home page the consent page shows for a document's
// client: its client_uri when that is on the document's own host, else
// the document's origin. Anyone can write "client_uri":
// "https://claude.ai" in a document they host; only the host of the
// client_id is proven (by serving the document), so that is the one shown
// (the draft's 6.3 asks to show it).
func documentHome(id, clientURI string) string {
	u, err := url.Parse(id)
	if err != nil {
		return ""
	}
	if h, err := url.Parse(clientURI); err == nil && clientURI != "" && strings.EqualFold(h.Hostname(), u.Hostname()) {
		return clientURI
	}
	return u.Scheme + "://" + u.Host
}

// cacheTTL is how long a document may be kept, from its Cache-Control
// header (RFC 9111 5.2.2): max-age within [minDocTTL, maxDocTTL];
// no-store and no-cache ask for the least we keep; nothing, the default.
func cacheTTL(header string) time.Duration {
	ttl := defaultDocTTL
	for _, directive := range strings.Split(header, ",") {
		name, value, _ := strings.Cut(strings.TrimSpace(directive), "=")
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "no-store", "no-cache":
			return minDocTTL
		case "max-age":
			n, err := strconv.ParseUint(strings.Trim(strings.TrimSpace(value), `"`), 10, 63)
			if errors.Is(err, strconv.ErrRange) {
				n = math.MaxInt32 // RFC 9111 1.2.2: a delta too large is 2^31
			} else if err != nil {
				return minDocTTL // a garbled max-age: keep it the least time
			}
			ttl = time.Duration(min(n, uint64(maxDocTTL/time.Second))) * time.Second
		}
	}
	return max(minDocTTL, min(ttl, maxDocTTL))
}
