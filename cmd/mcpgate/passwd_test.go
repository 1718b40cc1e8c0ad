package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/alexedwards/argon2id"

	"github.com/mcpgate/mcpgate/internal/authserver"
)

// fastHashes makes `mcpgate passwd` hash cheaply for the test (the
// format is the same).
func fastHashes(t *testing.T) {
	old := authserver.PasswordParams
	authserver.PasswordParams.Memory, authserver.PasswordParams.Iterations = 1024, 1
	t.Cleanup(func() { authserver.PasswordParams = old })
}

// passwdFrom makes passwd read stdin (not a terminal) as given.
func passwdFrom(t *testing.T, stdin string) {
	oldIn, oldTerm := passwdInput, passwdTerminal
	passwdInput = strings.NewReader(stdin)
	passwdTerminal = func(int) bool { return false }
	t.Cleanup(func() { passwdInput, passwdTerminal = oldIn, oldTerm })
}

// passwdTyped makes passwd read a terminal where entries are typed.
func passwdTyped(t *testing.T, entries ...string) {
	oldTerm, oldRead := passwdTerminal, passwdRead
	passwdTerminal = func(int) bool { return true }
	passwdRead = func(int) ([]byte, error) {
		if len(entries) == 0 {
			return nil, errors.New("EOF on the terminal")
		}
		e := entries[0]
		entries = entries[1:]
		return []byte(e), nil
	}
	t.Cleanup(func() { passwdTerminal, passwdRead = oldTerm, oldRead })
}

// checkHash asserts that out is one argon2id hash line of pw.
func checkHash(t *testing.T, out, pw string) {
	t.Helper()
	hash := strings.TrimSuffix(out, "\n")
	if strings.Contains(hash, "\n") || !strings.HasPrefix(hash, "$argon2id$") {
		t.Fatalf("stdout %q: want one argon2id hash line", out)
	}
	if ok, err := argon2id.ComparePasswordAndHash(pw, hash); !ok || err != nil {
		t.Errorf("the hash is not of %q: %v", pw, err)
	}
}

// TestPasswdFromStdin: one line of stdin (its CRLF end not included) is
// hashed; the password is never echoed; a short one gets a warning; an
// empty one fails.
func TestPasswdFromStdin(t *testing.T) {
	fastHashes(t)
	passwdFrom(t, "correct horse battery\r\nignored second line\n")
	r := runCLI("passwd")
	if r.code != exitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	checkHash(t, r.stdout, "correct horse battery")
	if strings.Contains(r.stdout+r.stderr, "correct horse") || r.stderr != "" {
		t.Errorf("stderr %q", r.stderr)
	}

	passwdFrom(t, "short")
	r = runCLI("passwd")
	if r.code != exitOK || !strings.Contains(r.stderr, "shorter than 8") {
		t.Errorf("short: exit %d, stderr %q", r.code, r.stderr)
	}
	checkHash(t, r.stdout, "short")

	passwdFrom(t, "\n")
	if r := runCLI("passwd"); r.code != exitFailure || r.stdout != "" {
		t.Errorf("empty: exit %d, stdout %q", r.code, r.stdout)
	}
}

// TestPasswdFromTerminal: from a terminal the password is asked twice
// (prompts on stderr); entries that differ fail.
func TestPasswdFromTerminal(t *testing.T) {
	fastHashes(t)
	passwdTyped(t, "tr0ub4dor&3", "tr0ub4dor&3")
	r := runCLI("passwd")
	if r.code != exitOK || strings.Count(r.stderr, "Password") != 2 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	checkHash(t, r.stdout, "tr0ub4dor&3")

	passwdTyped(t, "tr0ub4dor&3", "tr0ub4dor&4")
	if r := runCLI("passwd"); r.code != exitFailure || r.stdout != "" || !strings.Contains(r.stderr, "differ") {
		t.Errorf("differing entries: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	passwdTyped(t, "")
	if r := runCLI("passwd"); r.code != exitFailure {
		t.Errorf("empty entry: exit %d", r.code)
	}
	if r := runCLI("passwd", "hunter2"); r.code != exitUsage {
		t.Errorf("a password as an argument: exit %d, want usage", r.code)
	}
}
