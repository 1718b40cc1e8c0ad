package authserver

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// The admin's view of the server (the gateway's admin API and status
// page, internal/admin, through its AuthServer interface, which these
// methods satisfy without either package importing the other): the
// clients and grants as JSON, never a secret nor the hash of one, and
// revoking a grant or deleting a client.

// AdminClient is a client as the admin API lists it.
type AdminClient struct {
	ID           string   `json:"id"`
	Name         string   `json:"name,omitempty"`
	URI          string   `json:"uri,omitempty"`
	RedirectURIs []string `json:"redirectUris"`
	AuthMethod   string   `json:"authMethod"`
	// Confidential: it has a secret (which the admin never sees).
	Confidential bool `json:"confidential"`
	// Document: a client ID metadata document's, cached until Expires.
	Document  bool      `json:"document,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	Expires   time.Time `json:"expires,omitzero"`
	// Grants counts its live grants.
	Grants int `json:"grants"`
}

// AdminGrant is a grant as the admin API lists it: who allowed which
// client what, and when it was last used. Its refresh tokens are not
// shown, not even hashed.
type AdminGrant struct {
	ID         string    `json:"id"`
	User       string    `json:"user"`
	ClientID   string    `json:"clientId"`
	ClientName string    `json:"clientName,omitempty"`
	Resource   string    `json:"resource"`
	Scopes     []string  `json:"scopes"`
	CreatedAt  time.Time `json:"createdAt"`
	LastUsed   time.Time `json:"lastUsed"`
	// Expires is when its refresh token does, unless used before.
	Expires time.Time `json:"expires"`
}

// AdminClients lists the clients, oldest first.
func (s *Server) AdminClients(ctx context.Context) (json.RawMessage, error) {
	clients, err := s.store.Clients(ctx)
	if err != nil {
		return nil, err
	}
	grants, err := s.store.Grants(ctx)
	if err != nil {
		return nil, err
	}
	count := map[string]int{}
	for _, g := range grants {
		count[g.ClientID]++
	}
	out := make([]AdminClient, 0, len(clients))
	for _, c := range clients {
		out = append(out, AdminClient{
			ID: c.ID, Name: c.Name, URI: c.URI, RedirectURIs: append([]string{}, c.RedirectURIs...), AuthMethod: c.AuthMethod,
			Confidential: c.SecretHash != Hash{}, Document: c.Document, CreatedAt: c.CreatedAt, Expires: c.Expires,
			Grants: count[c.ID],
		})
	}
	return json.Marshal(out)
}

// AdminGrants lists the live grants, oldest first.
func (s *Server) AdminGrants(ctx context.Context) (json.RawMessage, error) {
	grants, err := s.store.Grants(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]AdminGrant, 0, len(grants))
	names := map[string]string{}
	for _, g := range grants {
		name, known := names[g.ClientID]
		if !known {
			if c, err := s.store.Client(ctx, g.ClientID); err == nil {
				name = c.Name
			}
			names[g.ClientID] = name
		}
		out = append(out, AdminGrant{
			ID: g.ID, User: g.User, ClientID: g.ClientID, ClientName: name, Resource: g.Resource,
			Scopes: g.Scopes, CreatedAt: g.CreatedAt, LastUsed: g.LastUsed, Expires: g.Expires,
		})
	}
	return json.Marshal(out)
}

// AdminRevokeGrant revokes grant id: its refresh token stops working and
// the gateway refuses its access tokens at once. False when there is no
// such grant.
func (s *Server) AdminRevokeGrant(ctx context.Context, id string) (bool, error) {
	if _, err := s.store.Grant(ctx, id); errors.Is(err, ErrNotFound) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	if err := s.store.RevokeGrant(ctx, id); err != nil {
		return false, err
	}
	s.deps.Logger.Info("authserver: grant revoked by an administrator", "grant", id)
	return true, nil
}

// AdminDeleteClient deletes client id and revokes its grants. False when
// there is no such client. A client ID metadata document's client may
// come back: its next authorization fetches the document again.
func (s *Server) AdminDeleteClient(ctx context.Context, id string) (bool, error) {
	if _, err := s.store.Client(ctx, id); errors.Is(err, ErrNotFound) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	if err := s.store.DeleteClient(ctx, id); err != nil {
		return false, err
	}
	s.deps.Logger.Info("authserver: client deleted by an administrator", "client", id)
	return true, nil
}
