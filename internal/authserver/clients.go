package authserver

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
)

// The client registry: how clients come to exist and where they may send
// users. A client is registered by dynamic client registration
// (register.go, RFC 7591) or names itself by the URL of its client ID
// metadata document (cimd.go, fetched through fetch.go); clientmeta.go
// checks what either says, redirects.go holds the redirect URI policy.
// The provider gets clients only through client and checks every
// redirect URI with redirectAllowed and registeredRedirect.
//
// Every client is in the Store, so the replicas sharing a Redis store
// share the clients; the registry itself keeps only the per-address
// registration buckets and the document fetches in progress, each behind
// its own lock.

// Bounds of the client table. Registration is open to anyone on the
// internet, so the table is capped; when it is full the oldest clients
// that never got a grant go first (a client that registered and never
// finished a sign-in has cost nothing to lose: it registers again).
const (
	defaultMaxClients = 1000
	registerEvery     = 3 * time.Second // a bucket refills one registration per
	registerBurst     = 20
	maxRegisterAddrs  = 10000
)

// errClientsFull: the table is at its cap and every client in it has a
// grant, so none may be dropped for a new one.
var errClientsFull = errors.New("authserver: client table full")

type clientRegistry struct {
	// Static after construction.
	s          *Server
	policy     *redirectPolicy
	maxClients int
	limit      *addrLimiter
	docs       *documents
}

func newClientRegistry(s *Server) (*clientRegistry, error) {
	patterns := s.cfg.RedirectURIs
	if patterns == nil {
		patterns = config.DefaultRedirectURIs
	}
	policy, err := newRedirectPolicy(patterns, s.cfg.LoopbackRedirects)
	if err != nil {
		return nil, err
	}
	c := &clientRegistry{
		s:          s,
		policy:     policy,
		maxClients: defaultMaxClients,
		limit:      newAddrLimiter(registerEvery, registerBurst, maxRegisterAddrs),
	}
	c.docs = newDocuments(c)
	return c, nil
}

// routes serves dynamic client registration when it is on; client ID
// metadata documents need no route (the provider asks client).
func (c *clientRegistry) routes(mux *http.ServeMux) {
	if !c.s.cfg.Registration {
		return
	}
	mux.HandleFunc("POST /oauth/register", c.register)
	mux.HandleFunc("OPTIONS /oauth/register", c.preflight)
}

// client returns the client of id: a registered one from the store, or,
// when id is an https URL and client ID metadata documents are on, the
// client its document describes (fetched, checked, cached). ErrNotFound
// when there is none; a refused document is an error that matches both
// ErrClientDocument and ErrNotFound, whose text says why (never which
// address a host resolved to).
func (c *clientRegistry) client(ctx context.Context, id string) (*Client, error) {
	if c.s.cfg.ClientMetadataDocuments && documentURL(id) {
		return c.docs.client(ctx, id)
	}
	return c.s.store.Client(ctx, id)
}

// redirectAllowed reports whether a client may register or use
// redirect URI uri under the configured policy.
func (c *clientRegistry) redirectAllowed(uri string) bool { return c.policy.check(uri) == nil }

// admit stores a new or refreshed client, first making room under the
// cap by deleting the oldest clients without a grant. There is no lock
// around the count and the put: concurrent registrations (or replicas)
// may overshoot the cap by their number, and the next admit prunes back
// below it.
func (c *clientRegistry) admit(ctx context.Context, cl *Client) error {
	st := c.s.store
	if _, err := st.Client(ctx, cl.ID); err == nil {
		return st.PutClient(ctx, cl) // a refreshed document: the table does not grow
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	clients, err := st.Clients(ctx)
	if err != nil {
		return err
	}
	if len(clients) >= c.maxClients {
		grants, err := st.Grants(ctx)
		if err != nil {
			return err
		}
		used := make(map[string]bool, len(grants))
		for _, g := range grants {
			used[g.ClientID] = true
		}
		slices.SortStableFunc(clients, func(a, b *Client) int { return a.CreatedAt.Compare(b.CreatedAt) })
		n := len(clients)
		for _, old := range clients {
			if n < c.maxClients {
				break
			}
			if used[old.ID] {
				continue
			}
			if err := st.DeleteClient(ctx, old.ID); err != nil {
				return err
			}
			c.s.deps.Logger.Info("authserver: client pruned to make room", "client", old.ID, "created", old.CreatedAt)
			n--
		}
		if n >= c.maxClients {
			return errClientsFull
		}
	}
	return st.PutClient(ctx, cl)
}
