package config

import (
	"encoding/json"
	"slices"
	"strings"
)

// Admin is the "gateway.admin" block: the admin API (/admin/...) and the
// status page (/status). Nil (the default): both are off (404).
type Admin struct {
	// Token is a static bearer token that opens the admin API (key
	// "token"; ${VAR} expanded): compared in constant time, never logged.
	// Default "": no static token (only admin principals get in).
	Token string
	// Scopes make a principal authenticated by gateway.auth an admin when
	// its scopes include one of them (key "scopes"). Default ["admin"].
	Scopes []string
	// Listen is a separate address for the admin routes (key "listen"):
	// with it they are served only there, not on gateway.listen. Default
	// "": on the main listener.
	Listen string
}

// NewAdmin returns an admin block with every setting at its default.
func NewAdmin() *Admin { return &Admin{Scopes: []string{"admin"}} }

// admin decodes "gateway.admin".
func (d *decoder) admin(path string, raw json.RawMessage, dst **Admin) {
	a := NewAdmin()
	if d.fields(path, raw, `an object like {"token": "${MCPGATE_ADMIN_TOKEN}"}`, func(key, p string, v json.RawMessage) bool {
		switch key {
		case "token":
			d.str(p, v, &a.Token, true)
		case "scopes":
			d.strs(p, v, &a.Scopes, false)
		case "listen":
			d.str(p, v, &a.Listen, true)
		default:
			return false
		}
		return true
	}) {
		*dst = a
	}
}

// checkAdmin records problems with the admin block: it must name a way in
// (a token, or gateway.auth for admin principals), and a listen address
// must be usable and differ from gateway.listen.
func (g *Gateway) checkAdmin(ps *Problems, path string) {
	a := g.Admin
	if a == nil {
		return
	}
	p := join(path, "admin")
	if a.Token == "" && g.Auth == nil {
		ps.add(p, `opens to nobody: set "token", or gateway.auth for admin principals`)
	}
	if a.Token != "" && len(a.Token) < 16 {
		ps.add(join(p, "token"), "is too short (at least 16 characters: openssl rand -hex 32)")
	}
	if slices.Contains(a.Scopes, "") {
		ps.add(join(p, "scopes"), "must not contain an empty scope")
	}
	if a.Listen != "" {
		if err := CheckListen(a.Listen); err != nil {
			ps.add(join(p, "listen"), "%v", err)
		} else if a.Listen == g.Listen && !strings.HasSuffix(a.Listen, ":0") {
			ps.add(join(p, "listen"), `is gateway.listen: leave it out to serve the admin routes there`)
		}
	}
}

// ListenAddr returns the admin block's listen address, "" for none (or no
// block).
func (a *Admin) ListenAddr() string {
	if a == nil {
		return ""
	}
	return a.Listen
}
