// Package logfile is an append-only log file that survives rotation: the
// audit log's file (internal/gateway opens it, the HTTP front's Auditor
// writes to it).
//
// Rotation tools move the file away under a writer that keeps its
// descriptor: logrotate's default renames the file and creates a new one
// (or leaves the creating to the writer), an operator may simply remove
// it. A writer that never reopens then writes on into the renamed file,
// or into an unlinked inode nobody can read. File compares the path's
// inode with its descriptor's before each write and reopens the path when
// they differ, so the first batch after a rotation lands in the new file,
// without a signal and without a timer. Reopen asks for the same
// explicitly (SIGHUP, for the rotation tools configured to send it).
// copytruncate needs nothing: the file is opened with O_APPEND, so the
// writes after the truncation start at its new end, not at the old
// offset past a hole.
//
// Concurrency: Write and Close are called by one goroutine at a time (the
// Auditor's writer); Reopen and Reopens may be called from any goroutine.
package logfile

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
)

// ErrClosed is returned by Write after Close.
var ErrClosed = errors.New("logfile: closed")

// ErrPipe is returned by Open and Write when the path names a named pipe
// or a socket. One put there would hold the writer for as long as its
// reader does (opening a pipe for writing waits for a reader, forever if
// none comes), and with it every line behind and the gateway's shutdown,
// which waits for the lines queued. A log that rotates is a file (or a
// device such as /dev/full); stderr has its own setting.
var ErrPipe = errors.New("logfile: a named pipe or socket, not a file")

// File is an append-only log file reopened when its path names another
// file (rotated) or none (removed), or when Reopen asked.
type File struct {
	path string
	perm os.FileMode

	reopen  atomic.Bool   // set by Reopen: the next Write reopens
	reopens atomic.Uint64 // times the path was opened again

	// Owned by the writing goroutine.
	f      *os.File    // nil: closed, or the last reopen failed
	fi     os.FileInfo // f's, at open: the identity the path is compared with
	closed bool
}

// Open opens (creating with perm) the file at path for appending.
func Open(path string, perm os.FileMode) (*File, error) {
	l := &File{path: path, perm: perm}
	if err := l.open(); err != nil {
		return nil, err
	}
	return l, nil
}

// Name is the file's path.
func (l *File) Name() string { return l.path }

// Reopen makes the next Write close the file and open its path again. It
// never blocks and never touches the file itself: the writing goroutine
// does, so that a slow disk holds up no signal handler.
func (l *File) Reopen() { l.reopen.Store(true) }

// Reopens returns how many times the path was opened again (after a
// rotation, a removal, or Reopen).
func (l *File) Reopens() uint64 { return l.reopens.Load() }

// Write appends p to the file, after reopening its path if it was moved,
// removed or Reopen asked. An error opening the path is returned (and the
// next Write tries again): the caller counts the bytes as lost rather
// than write them where nobody will look.
func (l *File) Write(p []byte) (int, error) {
	if l.closed {
		return 0, ErrClosed
	}
	if l.f == nil || l.reopen.Swap(false) || l.moved() {
		if err := l.swap(); err != nil {
			return 0, err
		}
	}
	return l.f.Write(p)
}

// Close closes the file; Writes after fail with ErrClosed.
func (l *File) Close() error {
	l.closed = true
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// moved reports whether the path no longer names the open file: renamed
// or removed (the stat fails), or another file put in its place.
func (l *File) moved() bool {
	fi, err := os.Stat(l.path)
	return err != nil || !os.SameFile(fi, l.fi)
}

// swap closes the open file (if any) and opens the path again.
func (l *File) swap() error {
	if l.f != nil {
		_ = l.f.Close() // its writes were made (or failed and were counted)
		l.f = nil
	}
	if err := l.open(); err != nil {
		return err
	}
	l.reopens.Add(1)
	return nil
}

func (l *File) open() error {
	if fi, err := os.Stat(l.path); err == nil && isPipe(fi) {
		return fmt.Errorf("%w: %s", ErrPipe, l.path)
	}
	// O_NONBLOCK: a named pipe put at the path between the Stat and the
	// open must not make the open wait for a reader (it fails, or opens
	// and is refused below). A regular file or a device ignores the flag.
	f, err := os.OpenFile(l.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE|syscall.O_NONBLOCK, l.perm)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("logfile: %s: %w", l.path, err)
	}
	if isPipe(fi) {
		f.Close()
		return fmt.Errorf("%w: %s", ErrPipe, l.path)
	}
	l.f, l.fi = f, fi
	return nil
}

// isPipe reports whether fi is a named pipe's or a socket's.
func isPipe(fi os.FileInfo) bool {
	return fi.Mode()&(os.ModeNamedPipe|os.ModeSocket) != 0
}
