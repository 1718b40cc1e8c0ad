package logfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func open(t *testing.T) (*File, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	f, err := Open(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, path
}

func write(t *testing.T, f *File, s string) {
	t.Helper()
	if n, err := f.Write([]byte(s)); err != nil || n != len(s) {
		t.Fatalf("Write(%q) = %d, %v", s, n, err)
	}
}

func wantFile(t *testing.T, path, want string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != want {
		t.Errorf("%s holds %q, want %q", filepath.Base(path), b, want)
	}
}

// logrotate's default: the file is renamed (and a new one created, or
// not): the next write goes to a file at the path, the old one keeps what
// was written before.
func TestRenamedFileReopened(t *testing.T) {
	for _, create := range []bool{false, true} {
		f, path := open(t)
		write(t, f, "a\n")
		if err := os.Rename(path, path+".1"); err != nil {
			t.Fatal(err)
		}
		if create {
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		write(t, f, "b\n")
		write(t, f, "c\n")
		wantFile(t, path+".1", "a\n")
		wantFile(t, path, "b\nc\n")
		if n := f.Reopens(); n != 1 {
			t.Errorf("create=%v: %d reopens, want 1", create, n)
		}
	}
}

// A removed file is created again at the next write, with its mode.
func TestRemovedFileReopened(t *testing.T) {
	f, path := open(t)
	write(t, f, "a\n")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	write(t, f, "b\n")
	wantFile(t, path, "b\n")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o600 {
		t.Errorf("recreated with mode %v, want 0600", perm)
	}
}

// copytruncate: the file is copied then truncated in place. The writes
// after start at its new end: no hole of zero bytes where the old content
// was.
func TestCopyTruncateNoHole(t *testing.T) {
	f, path := open(t)
	write(t, f, "first line\n")
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	write(t, f, "b\n")
	wantFile(t, path, "b\n")
	if n := f.Reopens(); n != 0 {
		t.Errorf("%d reopens for a truncation, want 0", n)
	}
}

// Reopen (SIGHUP) reopens the path at the next write even when it names
// the same file; the write is not lost.
func TestReopenAsked(t *testing.T) {
	f, path := open(t)
	write(t, f, "a\n")
	f.Reopen()
	write(t, f, "b\n")
	wantFile(t, path, "a\nb\n")
	if n := f.Reopens(); n != 1 {
		t.Errorf("%d reopens, want 1", n)
	}
	write(t, f, "c\n")
	if n := f.Reopens(); n != 1 {
		t.Errorf("%d reopens after a write with nothing moved, want still 1", n)
	}
}

// A path that cannot be opened again fails the write (the caller counts
// it); the next write tries again and succeeds once it can.
func TestReopenFailureRetried(t *testing.T) {
	f, path := open(t)
	write(t, f, "a\n")
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path, 0o700); err != nil { // in the way
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("lost\n")); err == nil {
		t.Fatal("writing with a directory in the file's place succeeded")
	}
	if _, err := f.Write([]byte("lost\n")); err == nil {
		t.Fatal("the second write succeeded")
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	write(t, f, "b\n")
	wantFile(t, path, "b\n")
	wantFile(t, path+".1", "a\n")
}

// A full device fails the write with ENOSPC and is not reopened for it.
func TestFullDevice(t *testing.T) {
	f, err := Open("/dev/full", 0o600)
	if err != nil {
		t.Skipf("no /dev/full: %v", err)
	}
	defer f.Close()
	for range 2 {
		if _, err := f.Write([]byte("x\n")); !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("write to /dev/full: %v, want ENOSPC", err)
		}
	}
	if n := f.Reopens(); n != 0 {
		t.Errorf("%d reopens of /dev/full, want 0", n)
	}
}

func TestWriteAfterClose(t *testing.T) {
	f, _ := open(t)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("x\n")); !errors.Is(err, ErrClosed) {
		t.Errorf("write after Close: %v, want ErrClosed", err)
	}
}

var _ io.WriteCloser = (*File)(nil)
