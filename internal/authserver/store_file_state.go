package authserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The state file: what a file store keeps across restarts (clients,
// grants, revocations, passkeys, the seed; never requests or codes, so a
// restart mid-login loses that login only), as one JSON document with a
// version, written whole after every change (writeState).

// stateVersion is the version of the state file this gateway writes and
// reads. A file of another version is refused, not guessed at: a newer
// gateway's records may mean something this one does not know.
const stateVersion = 1

// fileState is the state file's document.
type fileState struct {
	Version  int                  `json:"version"`
	Clients  []*Client            `json:"clients"`
	Grants   []*Grant             `json:"grants"`
	Revoked  map[string]time.Time `json:"revoked"` // grant id -> until when
	Passkeys []*Passkey           `json:"passkeys"`
	Seed     []byte               `json:"seed,omitempty"`
}

// parseState reads a state file's bytes, refusing what this gateway
// cannot trust: not JSON, another version, records without ids or twice,
// a seed of the wrong size.
func parseState(data []byte) (*fileState, error) {
	var st fileState
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&st); err != nil {
		return nil, fmt.Errorf("not a valid state file: %w", err)
	}
	if dec.More() {
		return nil, errors.New("not a valid state file: data after the document")
	}
	if st.Version != stateVersion {
		return nil, fmt.Errorf("version %d, and this gateway reads version %d only", st.Version, stateVersion)
	}
	clients := map[string]bool{}
	for i, c := range st.Clients {
		if c == nil || c.ID == "" {
			return nil, fmt.Errorf("clients[%d]: no id", i)
		}
		if clients[c.ID] {
			return nil, fmt.Errorf("clients[%d]: id %q twice", i, c.ID)
		}
		clients[c.ID] = true
	}
	grants := map[string]bool{}
	for i, g := range st.Grants {
		if g == nil || g.ID == "" {
			return nil, fmt.Errorf("grants[%d]: no id", i)
		}
		if grants[g.ID] {
			return nil, fmt.Errorf("grants[%d]: id %q twice", i, g.ID)
		}
		grants[g.ID] = true
	}
	for id := range st.Revoked {
		if grants[id] {
			return nil, fmt.Errorf("revoked: grant %q is also live", id)
		}
	}
	for i, p := range st.Passkeys {
		if p == nil || p.User == "" || len(p.ID) == 0 {
			return nil, fmt.Errorf("passkeys[%d]: no user or no credential id", i)
		}
	}
	if len(st.Seed) != 0 && len(st.Seed) != 32 {
		return nil, fmt.Errorf("seed: %d bytes, want 32", len(st.Seed))
	}
	return &st, nil
}

// snapshot returns the state to write: copies, so the caller may encode
// it without the lock while the store changes on.
func (m *memStore) snapshot() *fileState {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := &fileState{Version: stateVersion, Revoked: maps.Clone(m.revoked), Seed: slices.Clone(m.seed)}
	for _, c := range m.clients {
		st.Clients = append(st.Clients, cloneClient(c))
	}
	for _, g := range m.grants {
		st.Grants = append(st.Grants, cloneGrant(g))
	}
	for _, list := range m.passkeys {
		for _, p := range list {
			st.Passkeys = append(st.Passkeys, clonePasskey(p))
		}
	}
	// A stable order: the same records make the same file.
	slices.SortFunc(st.Clients, func(a, b *Client) int { return a.CreatedAt.Compare(b.CreatedAt) })
	slices.SortFunc(st.Grants, func(a, b *Grant) int { return a.CreatedAt.Compare(b.CreatedAt) })
	slices.SortStableFunc(st.Passkeys, func(a, b *Passkey) int { return strings.Compare(a.User, b.User) })
	return st
}

// restore replaces the written records with st's (requests and codes
// stay): at start from the file, and to undo a change whose write failed.
// st is not kept: it stays the caller's.
func (m *memStore) restore(st *fileState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.clients = map[string]*Client{}
	for _, c := range st.Clients {
		m.clients[c.ID] = cloneClient(c)
	}
	m.grants, m.refresh, m.previous = map[string]*Grant{}, map[Hash]string{}, map[Hash]string{}
	for _, g := range st.Grants {
		gg := cloneGrant(g)
		m.grants[g.ID] = gg
		m.indexLocked(gg)
	}
	m.revoked = maps.Clone(st.Revoked)
	if m.revoked == nil {
		m.revoked = map[string]time.Time{}
	}
	m.passkeys = map[string][]*Passkey{}
	for _, p := range st.Passkeys {
		m.passkeys[p.User] = append(m.passkeys[p.User], clonePasskey(p))
	}
	m.seed = slices.Clone(st.Seed)
	m.gen++
}

// writeState replaces the file at path with data so that a crash at any
// point leaves either the old file or the new one, whole: a temporary
// file in the same directory (0600: it holds hashes and the seed),
// synced, renamed over path, and the directory synced so the rename
// itself survives a power cut. beforeRename, when set, runs between the
// temporary file's sync and the rename (tests crash there).
func writeState(path string, data []byte, beforeRename func()) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+tempSuffix+"*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	if beforeRename != nil {
		beforeRename()
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		_ = os.Remove(tmp.Name())
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// tempSuffix marks writeState's temporary files; the ones a crash left
// are removed at start.
const tempSuffix = ".tmp-"

// removeTemps removes the temporary files a crash between write and
// rename left next to path.
func removeTemps(path string) {
	dir, prefix := filepath.Dir(path), filepath.Base(path)+tempSuffix
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}
