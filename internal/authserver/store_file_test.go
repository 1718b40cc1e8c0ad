package authserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

func fileKind() storeUnderTest {
	return storeUnderTest{
		open: func(t *testing.T, clock *testkit.Clock) Store {
			f, err := openFileStore(filepath.Join(t.TempDir(), "auth.json"), clock.Now, revokedFor)
			if err != nil {
				t.Fatal(err)
			}
			return f
		},
		advance: func(clock *testkit.Clock, d time.Duration) { clock.Advance(d) },
	}
}

func TestFileStoreContract(t *testing.T) { testStoreContract(t, fileKind()) }

// reopen opens the state file at path again: the store a restart gets.
func reopen(t *testing.T, path string) *fileStore {
	t.Helper()
	f, err := openFileStore(path, time.Now, revokedFor)
	if err != nil {
		t.Fatalf("reopening %s: %v", path, err)
	}
	return f
}

// What a client was told survives a restart: its registration, its
// grant and the rotated refresh token, a revocation, a passkey, the
// seed; a login in progress (request, code) does not, by design. The
// file is 0600.
func TestFileStoreSurvivesRestart(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	path := filepath.Join(t.TempDir(), "auth.json")
	s, err := OpenStore(ctx, config.AuthServer{StateFile: "auth.json", AccessTokenTTL: revokedFor}, filepath.Dir(path), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.PutClient(ctx, &Client{ID: "c1", AuthMethod: "none", CreatedAt: now}))
	must(s.PutGrant(ctx, testGrant("g1", "c1", "r1", now)))
	must(s.PutGrant(ctx, testGrant("g2", "c1", "x1", now)))
	if _, err := s.Rotate(ctx, secret("r1"), secret("r2"), now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	must(s.RevokeGrant(ctx, "g2"))
	must(s.PutPasskey(ctx, &Passkey{User: "ann", ID: []byte("k1"), Data: []byte("{}")}))
	seed, err := s.Seed(ctx)
	must(err)
	must(s.PutAuthRequest(ctx, &AuthRequest{ID: "req1"}, time.Minute))
	must(s.PutCode(ctx, secret("code"), "req1", time.Minute))

	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v %v, want mode 0600", fi, err)
	}
	r := reopen(t, path)
	if _, err := r.Client(ctx, "c1"); err != nil {
		t.Errorf("client after restart: %v", err)
	}
	if g, err := r.Rotate(ctx, secret("r2"), secret("r3"), now.Add(time.Hour)); err != nil || g.ID != "g1" {
		t.Errorf("the rotated refresh token after restart: %v %v", g, err)
	}
	if _, err := r.Rotate(ctx, secret("r1"), secret("r9"), now.Add(time.Hour)); !errors.Is(err, ErrReused) {
		t.Errorf("a replaced token after restart: %v, want ErrReused", err)
	}
	if !r.Revoked("g2") {
		t.Error("g2's revocation lost by the restart")
	}
	if keys, _ := r.Passkeys(ctx, "ann"); len(keys) != 1 {
		t.Errorf("passkeys after restart: %v", keys)
	}
	if again, _ := r.Seed(ctx); string(again) != string(seed) {
		t.Error("the seed changed across a restart")
	}
	if _, err := r.AuthRequest(ctx, "req1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a request survived the restart: %v", err)
	}
	if _, err := r.TakeCode(ctx, secret("code")); !errors.Is(err, ErrNotFound) {
		t.Errorf("a code survived the restart: %v", err)
	}
}

// A state file that cannot be trusted refuses to start, the error naming
// the file and what is wrong; a missing one starts empty; a missing
// directory refuses.
func TestFileStoreRefusesBadFile(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, content, says string }{
		{"corrupt", `{"version": 1, "clients": [`, "not a valid state file"},
		{"newer", `{"version": 2}`, "version 2"},
		{"noversion", `{"clients": []}`, "version 0"},
		{"noid", `{"version": 1, "clients": [{"name": "x"}]}`, "clients[0]: no id"},
		{"twice", `{"version": 1, "grants": [{"id": "g"}, {"id": "g"}]}`, `grants[1]: id "g" twice`},
		{"seed", `{"version": 1, "seed": "AAAA"}`, "seed: 3 bytes"},
		{"trailing", `{"version": 1} {}`, "data after the document"},
		{"both", `{"version": 1, "grants": [{"id": "g"}], "revoked": {"g": "2030-01-01T00:00:00Z"}}`, `grant "g" is also live`},
	} {
		path := filepath.Join(dir, c.name+".json")
		if err := os.WriteFile(path, []byte(c.content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := openFileStore(path, time.Now, revokedFor)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want an error naming %s and saying %q", c.name, err, path, c.says)
		}
	}
	s, err := openFileStore(filepath.Join(dir, "missing.json"), time.Now, revokedFor)
	if err != nil {
		t.Fatalf("missing file: %v", err)
	}
	if list, _ := s.Clients(context.Background()); len(list) != 0 {
		t.Errorf("a missing file starts with %v", list)
	}
	if _, err := openFileStore(filepath.Join(dir, "nodir", "auth.json"), time.Now, revokedFor); err == nil || !strings.Contains(err.Error(), "directory") {
		t.Errorf("missing directory: %v", err)
	}
}

// A write that fails (a full disk; here a directory standing where the
// file must go, which no rename replaces, even as root) fails the change
// and undoes it in memory, so nothing is reported that a restart would
// lose; the next change, once the disk is back, writes everything.
func TestFileStoreFailedWriteRollsBack(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	path := filepath.Join(t.TempDir(), "auth.json")
	s := reopen(t, path)
	if err := s.PutClient(ctx, &Client{ID: "kept", CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutGrant(ctx, testGrant("g1", "kept", "r1", now)); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(path, "full"), 0o700); err != nil {
		t.Fatal(err)
	}

	if err := s.PutClient(ctx, &Client{ID: "lost"}); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), path) {
		t.Fatalf("PutClient on a full disk: %v, want ErrUnavailable naming the file", err)
	}
	if _, err := s.Client(ctx, "lost"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the failed client is still in memory: %v", err)
	}
	if _, err := s.Rotate(ctx, secret("r1"), secret("r2"), now.Add(time.Hour)); err == nil {
		t.Fatal("Rotate on a full disk succeeded")
	}
	if g, err := s.Grant(ctx, "g1"); err != nil || g.Refresh != secret("r1") {
		t.Errorf("the failed rotation is still in memory: %+v %v", g, err)
	}
	if _, err := s.Seed(ctx); err == nil {
		t.Error("Seed on a full disk succeeded")
	}
	// A revocation that could not be written still holds here.
	if err := s.RevokeGrant(ctx, "g1"); err == nil {
		t.Error("RevokeGrant on a full disk reported success")
	}
	if !s.Revoked("g1") {
		t.Error("a revocation that could not be written was undone")
	}

	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
	if err := s.PutClient(ctx, &Client{ID: "later", CreatedAt: now.Add(time.Second)}); err != nil {
		t.Fatal(err)
	}
	r := reopen(t, path)
	list, _ := r.Clients(ctx)
	if len(list) != 2 || list[0].ID != "kept" || list[1].ID != "later" {
		t.Errorf("clients after the disk came back: %v", list)
	}
	if !r.Revoked("g1") {
		t.Error("the revocation was not written with the next change")
	}
}

// An injected write failure, once: the change fails and is undone, the
// next one succeeds.
func TestFileStoreWriteFailsOnce(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "auth.json")
	s := reopen(t, path)
	failed := false
	s.failWrite = func() error {
		if failed {
			return nil
		}
		failed = true
		return errors.New("no space left on device")
	}
	if err := s.PutPasskey(ctx, &Passkey{User: "ann", ID: []byte("k1")}); err == nil || !strings.Contains(err.Error(), "no space") {
		t.Fatalf("first PutPasskey: %v", err)
	}
	if keys, _ := s.Passkeys(ctx, "ann"); len(keys) != 0 {
		t.Errorf("the failed passkey is in memory: %v", keys)
	}
	if err := s.PutPasskey(ctx, &Passkey{User: "ann", ID: []byte("k2")}); err != nil {
		t.Fatal(err)
	}
	if keys, _ := reopen(t, path).Passkeys(ctx, "ann"); len(keys) != 1 || string(keys[0].ID) != "k2" {
		t.Errorf("passkeys written: %v", keys)
	}
}

// A crash between the temporary file and the rename leaves the old file
// whole: a restart reads it (the change that crashed was never
// reported) and removes the temporary file.
func TestFileStoreCrashBeforeRename(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "auth.json")
	s := reopen(t, path)
	if err := s.PutClient(ctx, &Client{ID: "before"}); err != nil {
		t.Fatal(err)
	}
	s.beforeRename = runtime.Goexit // the process dies here: nothing after runs
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.PutClient(ctx, &Client{ID: "crashed"})
		t.Error("PutClient returned past the crash")
	}()
	<-done
	temps, _ := filepath.Glob(path + tempSuffix + "*")
	if len(temps) != 1 {
		t.Fatalf("temporary files left by the crash: %v, want 1", temps)
	}
	r := reopen(t, path)
	list, _ := r.Clients(ctx)
	if len(list) != 1 || list[0].ID != "before" {
		t.Errorf("clients after the crash: %v, want the one before", list)
	}
	if left, _ := filepath.Glob(path + tempSuffix + "*"); len(left) != 0 {
		t.Errorf("temporary files after restart: %v", left)
	}
}

// Concurrent changes (run with -race): every one written, none lost to
// another's write.
func TestFileStoreConcurrentChanges(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	path := filepath.Join(t.TempDir(), "auth.json")
	s := reopen(t, path)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			id := fmt.Sprint("c", i)
			if err := s.PutClient(ctx, &Client{ID: id, CreatedAt: now}); err != nil {
				t.Error(err)
			}
			if err := s.PutGrant(ctx, testGrant("g"+id, id, "r"+id, now)); err != nil {
				t.Error(err)
			}
			if _, err := s.Rotate(ctx, secret("r"+id), secret("s"+id), now.Add(time.Hour)); err != nil {
				t.Error(err)
			}
			_, _ = s.Clients(ctx)
			_ = s.Revoked("g" + id)
		})
	}
	wg.Wait()
	r := reopen(t, path)
	clients, _ := r.Clients(ctx)
	grants, _ := r.Grants(ctx)
	if len(clients) != 8 || len(grants) != 8 {
		t.Fatalf("after 8 concurrent writers: %d clients, %d grants", len(clients), len(grants))
	}
	for _, g := range grants {
		if g.Refresh != secret("s"+g.ClientID) {
			t.Errorf("grant %s lost its rotation", g.ID)
		}
	}
}

// FuzzParseState: no input crashes the state file's parser, and what it
// accepts loads into a store and writes back to a file it accepts again.
func FuzzParseState(f *testing.F) {
	f.Add([]byte(`{"version": 1}`))
	f.Add([]byte(`{"version": 1, "clients": [{"id": "c", "redirectUris": ["https://a/cb"], "authMethod": "none"}], "grants": [{"id": "g", "previous": [[1,2]]}], "revoked": {"g2": "2026-01-01T00:00:00Z"}, "passkeys": [{"user": "u", "id": "AA=="}], "seed": "` + strings.Repeat("A", 43) + `="}`))
	f.Add([]byte(`{"version": 2}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := parseState(data)
		if err != nil {
			return
		}
		m := newMemStore(time.Now, time.Minute)
		m.restore(st)
		back := m.snapshot()
		if len(back.Clients) != len(st.Clients) || len(back.Grants) != len(st.Grants) {
			t.Fatalf("restore then snapshot: %d clients, %d grants; read %d, %d", len(back.Clients), len(back.Grants), len(st.Clients), len(st.Grants))
		}
		out, err := jsonIndent(back)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := parseState(out); err != nil {
			t.Fatalf("a snapshot does not parse: %v\n%s", err, out)
		}
	})
}
