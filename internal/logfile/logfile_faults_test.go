//go:build unix

package logfile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// hangLimit is how long a call may take before the test calls it hung: a
// failure detector only, never a bound the code is meant to meet.
const hangLimit = 10 * time.Second

// writeOrHang writes p to f on another goroutine and returns its error,
// or fails the test when the Write does not return; unblock then frees it.
func writeOrHang(t *testing.T, f *File, p string, unblock func()) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := f.Write([]byte(p))
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(hangLimit):
		t.Errorf("Write(%q) hung", p)
		unblock()
		return <-done
	}
}

// mkfifo makes a named pipe at path, or skips the test where there are none.
func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
}

// A named pipe put in the file's place (rotation gone wrong, or a hostile
// local user) fails the writes at once, with or without a reader at its
// other end, and nothing goes into it; once a file is back the writes go
// there. Opening a pipe for writing used to wait for a reader: with none,
// the audit log's writer hung for good, every line after it was dropped,
// and shutdown (which waits for the lines queued) never ended.
func TestPipeInPlaceOfTheFile(t *testing.T) {
	f, path := open(t)
	write(t, f, "a\n")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	mkfifo(t, path)
	// Frees a Write stuck opening the pipe (the old behaviour).
	unblock := func() {
		if r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			t.Cleanup(func() { r.Close() })
		}
	}
	if err := writeOrHang(t, f, "lost\n", unblock); !errors.Is(err, ErrPipe) {
		t.Errorf("write with a pipe without reader in the file's place: %v, want ErrPipe", err)
	}
	// A reader at the other end: still refused, and it reads nothing.
	r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := writeOrHang(t, f, "lost\n", func() {}); !errors.Is(err, ErrPipe) {
		t.Errorf("write with a read pipe in the file's place: %v, want ErrPipe", err)
	}
	buf := make([]byte, 64)
	if n, _ := r.Read(buf); n > 0 {
		t.Errorf("the pipe got %q", buf[:n])
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	write(t, f, "b\n")
	wantFile(t, path, "b\n")
}

// Open refuses a path that names a named pipe, at once.
func TestOpenPipeRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	mkfifo(t, path)
	done := make(chan error, 1)
	go func() {
		f, err := Open(path, 0o600)
		if err == nil {
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrPipe) {
			t.Errorf("Open of a named pipe: %v, want ErrPipe", err)
		}
	case <-time.After(hangLimit):
		t.Error("Open of a named pipe hung")
		if r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			defer r.Close()
		}
		<-done
	}
}
