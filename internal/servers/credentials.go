package servers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sort"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/conn"
)

// Per-principal upstream credentials (a remote server's
// "principalHeaders"). They are resolved when a session or a stateless
// request is opened, from the principal front put in its context, never
// from what the client sent: the client's own Authorization stays at the
// gateway. Where they go:
//
//   - A session of the older eras has an upstream session of its own
//     (isolated), opened with its principal's headers.
//   - A stateless request to a remote speaking 2026-07-28 is a POST of its
//     own, sent with its principal's headers (remote.Stateless.WithHeaders);
//     the probe runs with the headers of the request that started it.
//   - A stateless request translated for a remote of the session eras goes
//     through the translation pool, keyed by credential as well as by
//     capabilities: an upstream session serves one principal (with one set
//     of expanded headers) only, and is stopped when idle like an extra
//     (translate.go).
//
// Values are never logged nor put in an error: a refusal names the server,
// the header, the principal and the secret or claim missing.

// credential is the upstream headers of one principal.
type credential struct {
	// key tells credentials apart in the translation pool: "" for a
	// server without principalHeaders (everyone shares its sessions),
	// else the principal's name and a digest of its headers.
	key     string
	headers map[string]string
}

// credentialFor resolves cfg's upstream headers for the principal of ctx.
func credentialFor(ctx context.Context, cfg *config.Server) (credential, error) {
	if len(cfg.PrincipalHeaders) == 0 {
		return credential{headers: cfg.Headers}, nil
	}
	var name string
	var claims map[string]any
	if p := conn.Principal(ctx); p != nil {
		name, claims = p.Name, p.Claims
	}
	h, err := cfg.UpstreamHeaders(name, claims)
	if err != nil {
		return credential{}, err
	}
	return credential{key: name + "\x00" + digest(h), headers: h}, nil
}

// digest hashes headers, so that keys hold no secret.
func digest(h map[string]string) string {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	sum := sha256.New()
	for _, k := range names {
		sum.Write([]byte(k))
		sum.Write([]byte{0})
		sum.Write([]byte(h[k]))
		sum.Write([]byte{0})
	}
	return hex.EncodeToString(sum.Sum(nil))
}
