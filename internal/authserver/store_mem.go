package authserver

import (
	"context"
	"crypto/rand"
	"slices"
	"sync"
	"time"
)

// memStore is a Store in this process's memory: the records of one
// replica, which the file store (store_file.go) writes to its state file
// after every change. mu guards every map; no method calls out while
// holding it.
type memStore struct {
	now func() time.Time
	// revokedFor is how long a revoked grant is remembered: the longest
	// an access token issued under it stays valid.
	revokedFor time.Duration

	mu       sync.Mutex // guards everything below
	clients  map[string]*Client
	requests map[string]expiring[*AuthRequest]
	codes    map[Hash]*codeRecord
	grants   map[string]*Grant
	revoked  map[string]time.Time // grant id -> when it may be forgotten
	passkeys map[string][]*Passkey
	seed     []byte
	// refresh and previous index the grants by their current refresh
	// token and by the tokens it replaced (grant id), so that Rotate
	// finds a token's grant without scanning them all.
	refresh  map[Hash]string
	previous map[Hash]string
	// nextSweep is when sweepLocked next looks for expired records.
	nextSweep time.Time
	// gen counts the changes of what the file store writes (clients,
	// grants, revocations, passkeys, the seed): it writes when a call
	// moved it.
	gen uint64
}

// sweepEvery bounds how often the expired requests, codes and
// revocations are dropped: a sweep walks them all, so running it on
// every put made a burst of authorizations quadratic. Records live at
// most sweepEvery past their expiry (they are refused from it on).
const sweepEvery = time.Minute

type expiring[T any] struct {
	v       T
	expires time.Time
}

type codeRecord struct {
	request string
	expires time.Time
	taken   bool
	grant   string
}

func newMemStore(now func() time.Time, revokedFor time.Duration) *memStore {
	if now == nil {
		now = time.Now
	}
	return &memStore{
		now:        now,
		clients:    map[string]*Client{},
		requests:   map[string]expiring[*AuthRequest]{},
		codes:      map[Hash]*codeRecord{},
		grants:     map[string]*Grant{},
		revoked:    map[string]time.Time{},
		passkeys:   map[string][]*Passkey{},
		refresh:    map[Hash]string{},
		previous:   map[Hash]string{},
		revokedFor: revokedFor,
	}
}

// clone copies a record through its JSON-free fields: callers may keep
// and change what they get without touching the store.
func cloneClient(c *Client) *Client {
	cc := *c
	cc.RedirectURIs = slices.Clone(c.RedirectURIs)
	return &cc
}

func cloneRequest(r *AuthRequest) *AuthRequest {
	rr := *r
	rr.Scopes = slices.Clone(r.Scopes)
	return &rr
}

func cloneGrant(g *Grant) *Grant {
	gg := *g
	gg.Scopes = slices.Clone(g.Scopes)
	gg.Previous = slices.Clone(g.Previous)
	return &gg
}

func (m *memStore) PutClient(_ context.Context, c *Client) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.clients[c.ID] = cloneClient(c)
	m.gen++
	return nil
}

func (m *memStore) Client(_ context.Context, id string) (*Client, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.clients[id]
	if !ok {
		return nil, ErrNotFound
	}
	return cloneClient(c), nil
}

func (m *memStore) Clients(context.Context) ([]*Client, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Client, 0, len(m.clients))
	for _, c := range m.clients {
		out = append(out, cloneClient(c))
	}
	slices.SortFunc(out, func(a, b *Client) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

func (m *memStore) DeleteClient(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.clients, id)
	m.gen++
	// An admin's act, rare: a scan of the grants is fine here.
	for gid, g := range m.grants {
		if g.ClientID == id {
			m.revokeLocked(gid)
		}
	}
	return nil
}

func (m *memStore) PutAuthRequest(_ context.Context, r *AuthRequest, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweepLocked()
	m.requests[r.ID] = expiring[*AuthRequest]{cloneRequest(r), m.now().Add(ttl)}
	return nil
}

func (m *memStore) AuthRequest(_ context.Context, id string) (*AuthRequest, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.requests[id]
	if !ok || !m.now().Before(e.expires) {
		return nil, ErrNotFound
	}
	return cloneRequest(e.v), nil
}

func (m *memStore) DeleteAuthRequest(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.requests, id)
	return nil
}

func (m *memStore) PutCode(_ context.Context, code Hash, requestID string, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweepLocked()
	m.codes[code] = &codeRecord{request: requestID, expires: m.now().Add(ttl)}
	return nil
}

func (m *memStore) TakeCode(_ context.Context, code Hash) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.codes[code]
	if !ok || !m.now().Before(c.expires) {
		return "", ErrNotFound
	}
	if c.taken {
		if c.grant != "" {
			m.revokeLocked(c.grant)
		}
		return "", ErrReused
	}
	c.taken = true
	return c.request, nil
}

func (m *memStore) CodeGrant(_ context.Context, code Hash, grantID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, ok := m.codes[code]
	if !ok {
		return ErrNotFound
	}
	c.grant = grantID
	return nil
}

func (m *memStore) PutGrant(_ context.Context, g *Grant) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, gone := m.revoked[g.ID]; gone {
		return ErrNotFound // a grant revoked while its tokens were issued stays revoked
	}
	if old, ok := m.grants[g.ID]; ok {
		m.unindexLocked(old)
	}
	gg := cloneGrant(g)
	m.grants[g.ID] = gg
	m.indexLocked(gg)
	m.gen++
	return nil
}

// indexLocked enters g's refresh tokens in the indexes; unindexLocked
// takes them out.
func (m *memStore) indexLocked(g *Grant) {
	m.refresh[g.Refresh] = g.ID
	for _, h := range g.Previous {
		m.previous[h] = g.ID
	}
}

func (m *memStore) unindexLocked(g *Grant) {
	if m.refresh[g.Refresh] == g.ID {
		delete(m.refresh, g.Refresh)
	}
	for _, h := range g.Previous {
		if m.previous[h] == g.ID {
			delete(m.previous, h)
		}
	}
}

func (m *memStore) Grant(_ context.Context, id string) (*Grant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	g, ok := m.grants[id]
	if !ok {
		return nil, ErrNotFound
	}
	return cloneGrant(g), nil
}

func (m *memStore) Grants(context.Context) ([]*Grant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Grant, 0, len(m.grants))
	for _, g := range m.grants {
		out = append(out, cloneGrant(g))
	}
	slices.SortFunc(out, func(a, b *Grant) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

func (m *memStore) RevokeGrant(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sweepLocked()
	m.revokeLocked(id)
	return nil
}

// revokeLocked forgets grant id and remembers it as revoked for as long
// as one of its access tokens may live.
func (m *memStore) revokeLocked(id string) {
	if g, ok := m.grants[id]; ok {
		m.unindexLocked(g)
		delete(m.grants, id)
	}
	m.revoked[id] = m.now().Add(m.revokedFor)
	m.gen++
}

// maxPrevious bounds the replaced refresh tokens a grant remembers for
// reuse detection: a client refreshing every few minutes for a month
// would otherwise grow it without end. The oldest go first; presenting
// one of those is then ErrNotFound, still refused.
const maxPrevious = 32

func (m *memStore) Rotate(_ context.Context, old, next Hash, expires time.Time) (*Grant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if id, ok := m.refresh[old]; ok {
		g := m.grants[id]
		if !now.Before(g.Expires) {
			return nil, ErrNotFound
		}
		m.unindexLocked(g)
		g.Previous = append(g.Previous, old)
		if len(g.Previous) > maxPrevious {
			g.Previous = slices.Delete(g.Previous, 0, len(g.Previous)-maxPrevious)
		}
		g.Refresh, g.Expires, g.LastUsed = next, expires, now
		m.gen++
		m.indexLocked(g)
		return cloneGrant(g), nil
	}
	if id, ok := m.previous[old]; ok {
		m.revokeLocked(id)
		return nil, ErrReused
	}
	return nil, ErrNotFound
}

func (m *memStore) Revoked(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	until, ok := m.revoked[id]
	return ok && m.now().Before(until)
}

func (m *memStore) Seed(context.Context) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seed == nil {
		m.seed = make([]byte, 32)
		m.gen++
		_, _ = rand.Read(m.seed) // never fails (crypto/rand)
	}
	return slices.Clone(m.seed), nil
}

func (m *memStore) PutPasskey(_ context.Context, p *Passkey) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.passkeys[p.User] = append(m.passkeys[p.User], clonePasskey(p))
	m.gen++
	return nil
}

func (m *memStore) Passkeys(_ context.Context, user string) ([]*Passkey, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Passkey
	for _, p := range m.passkeys[user] {
		out = append(out, clonePasskey(p))
	}
	return out, nil
}

func (m *memStore) Close() error { return nil }

// sweepLocked drops expired requests, codes and revocations, so that a
// flood of abandoned authorizations cannot grow memory without end; at
// most once every sweepEvery.
func (m *memStore) sweepLocked() {
	now := m.now()
	if now.Before(m.nextSweep) {
		return
	}
	m.nextSweep = now.Add(sweepEvery)
	for id, e := range m.requests {
		if !now.Before(e.expires) {
			delete(m.requests, id)
		}
	}
	for h, c := range m.codes {
		if !now.Before(c.expires) {
			delete(m.codes, h)
		}
	}
	forgetPast(m.revoked, now)
}

// forgetPast drops the revocations that no longer matter at now: the
// access tokens of their grants have all expired.
func forgetPast(revoked map[string]time.Time, now time.Time) {
	for id, until := range revoked {
		if !now.Before(until) {
			delete(revoked, id)
		}
	}
}

// clonePasskey copies p, its bytes too.
func clonePasskey(p *Passkey) *Passkey {
	pp := *p
	pp.ID, pp.Data = slices.Clone(p.ID), slices.Clone(p.Data)
	return &pp
}

var _ Store = (*memStore)(nil)
