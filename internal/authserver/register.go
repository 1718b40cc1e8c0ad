package authserver

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"mime"
	"net/http"

	"github.com/go-json-experiment/json"
)

// Dynamic client registration (RFC 7591) at POST /oauth/register: the
// way Claude's connectors and the SDK clients make themselves known when
// they have no client ID metadata document. Open to anyone (no initial
// access token), so bounded: the body size, the metadata (clientmeta.go),
// a token bucket per address, and the size of the client table (admit).
// CORS is open, since browser-based clients register too; nothing here
// rides on cookies.

// maxRegistrationBody bounds a registration request: ten redirect URIs
// of the longest allowed and every other field fit in it.
const maxRegistrationBody = 32 << 10

// registrationAnswer is the answer of RFC 7591 3.2.1: the client's identifier,
// its secret when it has one, and the metadata as registered (defaults
// filled in, unused fields left out).
type registrationAnswer struct {
	ClientID         string `json:"client_id"`
	ClientSecret     string `json:"client_secret,omitempty"`
	ClientIDIssuedAt int64  `json:"client_id_issued_at"`
	// ClientSecretExpiresAt is required with a secret; 0: it does not
	// expire.
	ClientSecretExpiresAt *int64   `json:"client_secret_expires_at,omitempty"`
	RedirectURIs          []string `json:"redirect_uris"`
	TokenEndpointAuth     string   `json:"token_endpoint_auth_method"`
	GrantTypes            []string `json:"grant_types"`
	ResponseTypes         []string `json:"response_types"`
	ClientName            string   `json:"client_name,omitempty"`
	ClientURI             string   `json:"client_uri,omitempty"`
}

func (c *clientRegistry) register(w http.ResponseWriter, r *http.Request) {
	registryCORS(w)
	now := c.s.deps.Now()
	bucket := registerBucket(r, c.s.deps.TrustProxyHeaders)
	if !c.limit.allow(bucket, now) {
		c.s.deps.Logger.Info("authserver: registration refused: rate", "addr", bucket)
		w.Header().Set("Retry-After", "60")
		writeRegisterError(w, http.StatusTooManyRequests, &metadataError{Code: "temporarily_unavailable", Description: "too many registrations from this address"})
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeRegisterError(w, http.StatusBadRequest, badMetadata("the request must be application/json"))
		return
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRegistrationBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeRegisterError(w, http.StatusRequestEntityTooLarge, badMetadata("larger than %d bytes", maxRegistrationBody))
			return
		}
		writeRegisterError(w, http.StatusBadRequest, badMetadata("the request body could not be read"))
		return
	}
	m, err := decodeMetadata(data)
	var cl *Client
	if err == nil {
		cl, err = m.toClient(c.policy, false)
	}
	if err != nil {
		refused := &metadataError{}
		if !errors.As(err, &refused) {
			refused = badMetadata("%v", err)
		}
		c.s.deps.Logger.Info("authserver: registration refused", "addr", r.RemoteAddr, "error", refused.Code, "why", refused.Description)
		writeRegisterError(w, http.StatusBadRequest, refused)
		return
	}
	cl.ID, cl.CreatedAt = randomClientToken(16), now
	out := registrationAnswer{
		ClientID: cl.ID, ClientIDIssuedAt: now.Unix(),
		RedirectURIs: cl.RedirectURIs, TokenEndpointAuth: cl.AuthMethod,
		GrantTypes: m.GrantTypes, ResponseTypes: m.ResponseTypes,
		ClientName: cl.Name, ClientURI: cl.URI,
	}
	if cl.AuthMethod != clientAuthNone {
		out.ClientSecret = randomClientToken(32)
		cl.SecretHash = sha256.Sum256([]byte(out.ClientSecret))
		out.ClientSecretExpiresAt = new(int64)
	}
	switch err := c.admit(r.Context(), cl); {
	case errors.Is(err, errClientsFull):
		c.s.deps.Logger.Warn("authserver: registration refused: client table full", "addr", r.RemoteAddr, "max", c.maxClients)
		writeRegisterError(w, http.StatusServiceUnavailable, &metadataError{Code: "temporarily_unavailable", Description: "no room for another client"})
		return
	case errors.Is(err, ErrUnavailable):
		c.s.deps.Logger.Error("authserver: registration not stored", "err", err)
		w.Header().Set("Retry-After", retryAfterSeconds)
		writeRegisterError(w, http.StatusServiceUnavailable, &metadataError{Code: errUnavailable, Description: "the client could not be stored; try again"})
		return
	case err != nil:
		c.s.deps.Logger.Error("authserver: registration not stored", "err", err)
		writeRegisterError(w, http.StatusInternalServerError, &metadataError{Code: "server_error", Description: "the client could not be stored"})
		return
	}
	c.s.deps.Logger.Info("authserver: client registered", "client", cl.ID, "name", cl.Name, "auth", cl.AuthMethod, "addr", r.RemoteAddr)
	writeClientJSON(w, http.StatusCreated, out)
}

// preflight answers a browser's CORS preflight of a registration.
func (c *clientRegistry) preflight(w http.ResponseWriter, _ *http.Request) {
	registryCORS(w)
	h := w.Header()
	h.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
	h.Set("Access-Control-Allow-Headers", "Content-Type, Authorization, Mcp-Protocol-Version")
	h.Set("Access-Control-Max-Age", "3600")
	w.WriteHeader(http.StatusNoContent)
}

// registryCORS lets any origin read the answer: it carries nothing a
// cookie or an ambient credential earned.
func registryCORS(w http.ResponseWriter) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
}

func writeRegisterError(w http.ResponseWriter, status int, e *metadataError) {
	writeClientJSON(w, status, e)
}

// writeClientJSON writes v with the headers RFC 7591 3.2.1 asks of an answer
// that may hold a secret: never stored by a cache.
func writeClientJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// randomClientToken returns n random bytes, base64url without padding.
func randomClientToken(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}
