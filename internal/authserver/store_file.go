package authserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// fileStore is a memStore whose clients, grants, revocations, passkeys
// and seed are written to a state file (store_file_state.go) after every
// change, before the change is reported done: what a client was told
// (a registration, a token) survives a restart. A change whose write
// fails returns the error and is undone in memory, except a revocation:
// a grant revoked stays revoked in this process even when the file could
// not say so, refusing more being the safe side.
//
// Locking: wmu serializes the changes that are written, from the change
// in memory to the end of its write, so that an undo restores exactly
// the state before its own change; it is taken before memStore.mu, never
// while holding it. Reads take memStore.mu only and never wait for a
// write.
type fileStore struct {
	*memStore
	path string

	wmu sync.Mutex // serializes written changes; guards saved
	// saved is the state the file holds now (nil: no file yet).
	saved *fileState
	// beforeRename, when set, runs inside each write between the
	// temporary file and the rename (tests crash there).
	beforeRename func()
	// failWrite, when set, is asked before each write and fails it with
	// its error (tests: a full disk).
	failWrite func() error
}

// openFileStore loads the state file at path: a missing file starts
// empty (it is written at the first change), a file that cannot be read
// or trusted refuses to start, naming the file and what is wrong.
func openFileStore(path string, now func() time.Time, revokedFor time.Duration) (*fileStore, error) {
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("authserver: state file %s: its directory does not exist", path)
	}
	f := &fileStore{memStore: newMemStore(now, revokedFor), path: path}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("authserver: state file %s: %w", path, err)
	default:
		st, err := parseState(data)
		if err != nil {
			return nil, fmt.Errorf("authserver: state file %s: %w", path, err)
		}
		f.restore(st)
		f.saved = st
	}
	removeTemps(path)
	return f, nil
}

// change runs op on the memory store and, if op changed what the file
// holds, writes the file; a failed write undoes op (revocations stay)
// and is returned. op's own error is returned otherwise: a refresh
// token's reuse revokes its grant (written) and still answers ErrReused.
func (f *fileStore) change(op func() error) error {
	f.wmu.Lock()
	defer f.wmu.Unlock()
	f.mu.Lock()
	before := f.gen
	f.mu.Unlock()
	opErr := op()
	f.mu.Lock()
	moved := f.gen != before
	f.mu.Unlock()
	if !moved {
		return opErr
	}
	st := f.snapshot()
	err := f.write(st)
	if err != nil {
		f.undo()
		return fmt.Errorf("%w: state file %s: %w", ErrUnavailable, f.path, err)
	}
	f.saved = st
	return opErr
}

// write writes st to the file.
func (f *fileStore) write(st *fileState) error {
	if f.failWrite != nil {
		if err := f.failWrite(); err != nil {
			return err
		}
	}
	data, err := jsonIndent(st)
	if err != nil {
		return err
	}
	return writeState(f.path, data, f.beforeRename)
}

// jsonIndent is the state file's encoding: indented, for the person who
// opens it.
func jsonIndent(st *fileState) ([]byte, error) { return json.MarshalIndent(st, "", "  ") }

// undo restores the state last written, keeping the revocations made
// since (and their grants gone). Called with wmu held.
func (f *fileStore) undo() {
	f.mu.Lock()
	revoked := make(map[string]time.Time, len(f.revoked))
	for id, until := range f.revoked {
		revoked[id] = until
	}
	f.mu.Unlock()
	saved := f.saved
	if saved == nil {
		saved = &fileState{Version: stateVersion}
	}
	f.restore(saved)
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, until := range revoked {
		if _, ok := f.revoked[id]; !ok {
			if g, ok := f.grants[id]; ok {
				f.unindexLocked(g)
				delete(f.grants, id)
			}
			f.revoked[id] = until
		}
	}
}

func (f *fileStore) PutClient(ctx context.Context, c *Client) error {
	return f.change(func() error { return f.memStore.PutClient(ctx, c) })
}

func (f *fileStore) DeleteClient(ctx context.Context, id string) error {
	return f.change(func() error { return f.memStore.DeleteClient(ctx, id) })
}

func (f *fileStore) TakeCode(ctx context.Context, code Hash) (id string, err error) {
	err = f.change(func() error {
		var err error
		id, err = f.memStore.TakeCode(ctx, code)
		return err
	})
	return id, err
}

func (f *fileStore) PutGrant(ctx context.Context, g *Grant) error {
	return f.change(func() error { return f.memStore.PutGrant(ctx, g) })
}

func (f *fileStore) RevokeGrant(ctx context.Context, id string) error {
	return f.change(func() error { return f.memStore.RevokeGrant(ctx, id) })
}

func (f *fileStore) Rotate(ctx context.Context, old, next Hash, expires time.Time) (g *Grant, err error) {
	err = f.change(func() error {
		var err error
		g, err = f.memStore.Rotate(ctx, old, next, expires)
		return err
	})
	if err != nil {
		return nil, err
	}
	return g, nil
}

func (f *fileStore) Seed(ctx context.Context) (seed []byte, err error) {
	err = f.change(func() error {
		var err error
		seed, err = f.memStore.Seed(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return seed, nil
}

func (f *fileStore) PutPasskey(ctx context.Context, p *Passkey) error {
	return f.change(func() error { return f.memStore.PutPasskey(ctx, p) })
}

var _ Store = (*fileStore)(nil)
