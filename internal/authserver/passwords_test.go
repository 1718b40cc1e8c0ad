package authserver

import (
	"context"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
)

// TestHashPassword: what `mcpgate passwd` prints is an argon2id PHC
// string with PasswordParams that a user entry then signs in with.
func TestHashPassword(t *testing.T) {
	old := PasswordParams
	PasswordParams.Memory, PasswordParams.Iterations = 1024, 1 // fast under -race
	t.Cleanup(func() { PasswordParams = old })
	h, err := HashPassword("s3cret pass")
	if err != nil || !strings.HasPrefix(h, "$argon2id$v=19$m=1024,t=1,p=4$") {
		t.Fatalf("hash %q, %v", h, err)
	}
	p, err := newPasswords([]config.AuthUser{{Name: "u", PasswordHash: h}})
	if err != nil {
		t.Fatal(err)
	}
	for pw, want := range map[string]bool{"s3cret pass": true, "s3cret pas": false, "": false} {
		if ok, err := p.check(context.Background(), "u", pw); ok != want || err != nil {
			t.Errorf("check(%q) = %v, %v; want %v", pw, ok, err, want)
		}
	}
	if _, err := HashPassword(""); err == nil {
		t.Errorf("an empty password was hashed")
	}
}

// TestDummyHashFollowsTheUsers: the hash an unknown user is checked
// against is made like the first configured one (bcrypt of the same
// cost here), so that it costs the same.
func TestDummyHashFollowsTheUsers(t *testing.T) {
	p, err := newPasswords([]config.AuthUser{{Name: "nopw"}, {Name: "b", PasswordHash: bcryptHash(t, "pw")}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p.dummy, "$2a$04$") {
		t.Errorf("dummy %q: want bcrypt of cost 4", p.dummy)
	}
	if _, err := newPasswords([]config.AuthUser{{Name: "x", PasswordHash: "$argon2id$garbage"}}); err == nil {
		t.Errorf("an unreadable hash was accepted")
	}
}

// TestCheckWaitsForASlot: a check queued behind busy slots gives up
// with its context.
func TestCheckWaitsForASlot(t *testing.T) {
	p, err := newPasswords([]config.AuthUser{{Name: "a", PasswordHash: argonHash(t, "pw")}})
	if err != nil {
		t.Fatal(err)
	}
	for range cap(p.slots) {
		p.slots <- struct{}{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if ok, err := p.check(ctx, "a", "pw"); ok || err == nil {
		t.Errorf("check with every slot taken and ctx done: %v, %v", ok, err)
	}
}

func TestNormalizeCode(t *testing.T) {
	for in, want := range map[string]string{
		"ABCD-EFGH-JKMN-PQRS": "ABCDEFGHJKMNPQRS",
		"abcd efgh jkmn pqrs": "ABCDEFGHJKMNPQRS",
		"O0Il-1":              "00111",
	} {
		if got := normalizeCode(in); got != want {
			t.Errorf("normalizeCode(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzNormalizeCode: normalizing is idempotent, and a code always
// matches its own normal form.
func FuzzNormalizeCode(f *testing.F) {
	f.Add("ABCD-EFGH-JKMN-PQRS")
	f.Add("o0 iL-\t")
	f.Add("é-ß")
	f.Fuzz(func(t *testing.T, s string) {
		n := normalizeCode(s)
		if normalizeCode(n) != n {
			t.Fatalf("not idempotent: %q -> %q -> %q", s, n, normalizeCode(n))
		}
	})
}

// TestSignInCodeOnce: the code is good exactly once, even to two
// sign-ins at the same moment.
func TestSignInCodeOnce(t *testing.T) {
	code, c := newSignInCode()
	results := make(chan bool, 8)
	for range 8 {
		go func() { results <- c.take(code) }()
	}
	won := 0
	for range 8 {
		if <-results {
			won++
		}
	}
	if won != 1 || c.usable() {
		t.Errorf("the code signed in %d times (usable after: %v)", won, c.usable())
	}
	var none *signInCode
	if none.take(code) || none.usable() {
		t.Errorf("no code (signInCode off) took one")
	}
}
