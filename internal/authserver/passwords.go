package authserver

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/alexedwards/argon2id"
	"golang.org/x/crypto/bcrypt"

	"github.com/mcpgate/mcpgate/internal/config"
)

// Who may sign in: the configured users and their password hashes, and
// the one-time sign-in code.

// ownerUser is who the one-time sign-in code signs in when no users are
// configured: the gateway's owner, who read the code in its log.
const ownerUser = "owner"

// PasswordParams are the argon2id parameters of HashPassword: RFC 9106's
// second recommended option (64 MiB, 3 passes, 4 lanes), about a tenth
// of a second on a small server. Verification uses each hash's own.
var PasswordParams = argon2id.Params{Memory: 64 * 1024, Iterations: 3, Parallelism: 4, SaltLength: 16, KeyLength: 32}

// HashPassword returns the argon2id hash (PHC string) of password with
// PasswordParams: what `mcpgate passwd` prints for
// gateway.auth.server.users[].passwordHash.
func HashPassword(password string) (string, error) {
	if password == "" {
		return "", errors.New("empty password")
	}
	return argon2id.CreateHash(password, &PasswordParams)
}

// maxPasswordLen bounds what is hashed: bcrypt takes 72 bytes at most,
// and no one types more than this.
const maxPasswordLen = 1024

// passwords checks passwords against the users' hashes. A check costs
// the same whoever the user: an unknown user, or one without a password
// (passkeys only), is checked against dummy, a hash of a random password
// made like the configured ones, so the time of a refusal does not tell
// which names exist. slots bounds the checks running at once: an argon2id
// check takes tens of MiB, and a flood of sign-ins must queue rather
// than exhaust memory.
type passwords struct {
	hashes map[string]string // user name -> hash; "" for passkey-only users
	order  []string          // user names as configured
	dummy  string
	slots  chan struct{}
	// compared counts hash comparisons (tests: an unknown user costs one).
	compared func()
}

func newPasswords(users []config.AuthUser) (*passwords, error) {
	p := &passwords{hashes: map[string]string{}, slots: make(chan struct{}, 2), compared: func() {}}
	like := ""
	for _, u := range users {
		p.hashes[u.Name] = u.PasswordHash
		p.order = append(p.order, u.Name)
		if like == "" && u.PasswordHash != "" {
			like = u.PasswordHash
		}
	}
	var err error
	if p.dummy, err = dummyHash(like); err != nil {
		return nil, err
	}
	return p, nil
}

// dummyHash hashes a random password with the parameters of hash (the
// first configured one), or PasswordParams when there is none.
func dummyHash(like string) (string, error) {
	pw := rand.Text()
	switch hashKind(like) {
	case "bcrypt":
		cost, err := bcrypt.Cost([]byte(like))
		if err != nil {
			return "", fmt.Errorf("authserver: users: a password hash: %w", err)
		}
		h, err := bcrypt.GenerateFromPassword([]byte(pw), cost)
		return string(h), err
	case "argon2id":
		params, _, _, err := argon2id.DecodeHash(like)
		if err != nil {
			return "", fmt.Errorf("authserver: users: a password hash: %w", err)
		}
		return argon2id.CreateHash(pw, params)
	}
	return argon2id.CreateHash(pw, &PasswordParams)
}

// hashKind tells a hash's algorithm by its prefix ("" for none known).
func hashKind(hash string) string {
	switch {
	case strings.HasPrefix(hash, "$argon2id$"):
		return "argon2id"
	case strings.HasPrefix(hash, "$2a$"), strings.HasPrefix(hash, "$2b$"), strings.HasPrefix(hash, "$2y$"):
		return "bcrypt"
	}
	return ""
}

// known reports whether name is a configured user (or the owner, when
// no users are configured).
func (p *passwords) known(name string) bool {
	if len(p.order) == 0 {
		return name == ownerUser
	}
	_, ok := p.hashes[name]
	return ok
}

// any reports whether some user has a password (else the sign-in page
// offers no password form).
func (p *passwords) any() bool {
	for _, h := range p.hashes {
		if h != "" {
			return true
		}
	}
	return false
}

// names lists who may sign in.
func (p *passwords) names() []string {
	if len(p.order) == 0 {
		return []string{ownerUser}
	}
	return p.order
}

// check reports whether password is name's. It waits for a slot (or
// ctx), then compares against name's hash, or the dummy one: the same
// work either way.
func (p *passwords) check(ctx context.Context, name, password string) (bool, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	defer func() { <-p.slots }()
	hash, ok := p.hashes[name]
	genuine := ok && hash != ""
	if !genuine {
		hash = p.dummy
	}
	if len(password) > maxPasswordLen {
		password = password[:maxPasswordLen]
	}
	p.compared()
	var match bool
	switch hashKind(hash) {
	case "argon2id":
		m, err := argon2id.ComparePasswordAndHash(password, hash)
		match = err == nil && m
	case "bcrypt":
		match = bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) == nil
	}
	return match && genuine, nil
}

// signInCode is the one-time sign-in code: made at start, printed once
// in the log, good for one sign-in. Only its hash is kept, and it is
// compared in constant time. mu guards hash and used.
type signInCode struct {
	mu   sync.Mutex
	hash [32]byte
	used bool
}

// codeAlphabet is Crockford's base32, without the letters people
// mistake for others: what a person copies from a log is read right.
const codeAlphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// newSignInCode returns a code (four groups of four, 80 bits) and its
// keeper.
func newSignInCode() (string, *signInCode) {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	var sb strings.Builder
	for i, c := range b {
		if i > 0 && i%4 == 0 {
			sb.WriteByte('-')
		}
		sb.WriteByte(codeAlphabet[c%32]) // 256 is a multiple of 32: no bias
	}
	code := sb.String()
	return code, &signInCode{hash: sha256.Sum256([]byte(normalizeCode(code)))}
}

// normalizeCode is a typed code as compared: upper case, without the
// spaces and dashes a person may add or drop, O read as 0, I and L as 1
// (Crockford's reading).
func normalizeCode(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case ' ', '-', '\t':
			return -1
		case 'o', 'O':
			return '0'
		case 'i', 'I', 'l', 'L':
			return '1'
		}
		if r >= 'a' && r <= 'z' {
			return r - 'a' + 'A'
		}
		return r
	}, s)
}

// take uses the code if typed is it and it is unused: true once, then
// never again.
func (c *signInCode) take(typed string) bool {
	if c == nil {
		return false
	}
	h := sha256.Sum256([]byte(normalizeCode(typed)))
	c.mu.Lock()
	defer c.mu.Unlock()
	if subtle.ConstantTimeCompare(h[:], c.hash[:]) != 1 || c.used {
		return false
	}
	c.used = true
	return true
}

// usable reports whether the code can still sign someone in (the
// sign-in page offers it only then).
func (c *signInCode) usable() bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.used
}
