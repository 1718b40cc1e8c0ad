package stdio

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// Errors returned by Stdio.
var (
	// ErrNotRunning is returned by Send when no process is up: before the
	// first start succeeded, between an exit and the restart, or for good
	// after an exit without Restart.
	ErrNotRunning = errors.New("upstream: server process is not running")
	// ErrClosed is returned by Send after Close.
	ErrClosed = errors.New("upstream: closed")
	// ErrQueueFull is returned by TrySend when the process's send queue is
	// full (its stdin is not being read fast enough).
	ErrQueueFull = errors.New("upstream: send queue of the server process is full")
	// ErrNewline is returned by Send for a message that still contains a raw
	// '\n' or '\r' after compaction. Outside a JSON string they are
	// whitespace and are removed; inside a string they make the message
	// invalid JSON, and writing it would split it into two lines (a lone
	// '\r' ends a line for servers reading with universal newlines).
	ErrNewline = errors.New("upstream: message contains a newline inside a JSON string")
	// ErrExited is matched (errors.Is) by the error passed to Handler.Exited
	// for every exit that Close did not ask for; that error is an
	// *ExitError.
	ErrExited = errors.New("upstream: server process exited")
	// ErrSpawn is wrapped by the error of a start that could not run the
	// command at all (not found, not executable, bad working directory).
	ErrSpawn = errors.New("upstream: cannot start the server command")
)

// ExitError describes an exit of a server process that Close did not ask
// for. It matches ErrExited with errors.Is, and unwraps to the
// *exec.ExitError of the process (nil for a clean exit with status 0).
type ExitError struct {
	Status string        // "exit status 3", "signal: killed"
	Uptime time.Duration // from start to the exit of the leader
	// Stderr holds the last few stderr lines of the process (at most
	// stderrTailLines, each cut to stderrTailBytes), oldest first.
	Stderr []string
	// Cause is the stderr line that says why it failed (see CauseLine),
	// looked for in the last 32 lines; "" when none does. Error shows it
	// instead of the tail: the last lines of a stack trace name no cause.
	Cause string
	// Reason is set when the gateway killed the process: "stuck: ..." when
	// it stopped reading stdin, "stdin closed by the server" when it closed
	// its stdin but ran on, or the reason given to Stdio.Restart.
	Reason string
	// Stuck reports that the process was killed for not reading stdin.
	Stuck bool

	err error // *exec.ExitError, or nil
}

// Error reads e.g. `upstream: server process exited: exit status 1 after
// 1.2s; stderr: "Error: Cannot find package 'zod'"` when a line names the
// cause, else `...; last stderr: "starting" | "bye"`, the tail.
func (e *ExitError) Error() string {
	var b strings.Builder
	b.WriteString(ErrExited.Error())
	b.WriteString(": ")
	b.WriteString(e.Status)
	if e.Reason != "" {
		fmt.Fprintf(&b, " (killed by the gateway: %s)", e.Reason)
	}
	fmt.Fprintf(&b, " after %v", e.Uptime.Round(time.Millisecond))
	switch {
	case e.Cause != "":
		fmt.Fprintf(&b, "; stderr: %q", e.Cause)
	case len(e.Stderr) > 0:
		b.WriteString("; last stderr:")
		for i, l := range e.Stderr {
			if i > 0 {
				b.WriteString(" |")
			}
			fmt.Fprintf(&b, " %q", l)
		}
	}
	return b.String()
}

// Is makes errors.Is(err, ErrExited) true.
func (e *ExitError) Is(target error) bool { return target == ErrExited }

// Unwrap returns the *exec.ExitError of the process, if any.
func (e *ExitError) Unwrap() error { return e.err }

// spawnError is a start that could not run the command. Its message names
// the command and the cause plainly, since clients see it: "command not
// found: uvx", "cannot run /x: permission denied".
type spawnError struct {
	msg string
	err error
}

func (e *spawnError) Error() string        { return e.msg }
func (e *spawnError) Is(target error) bool { return target == ErrSpawn }
func (e *spawnError) Unwrap() error        { return e.err }

// newSpawnError words err, returned by exec.Cmd.Start (or pipe creation),
// for the command command run in dir.
func newSpawnError(command, dir string, err error) error {
	var pe *fs.PathError
	var msg string
	switch de := workdirError(dir); {
	case de != nil:
		msg = fmt.Sprintf("cannot use working directory %s for %s: %v", dir, command, de)
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		msg = "command not found: " + command
	case errors.As(err, &pe):
		msg = fmt.Sprintf("cannot run %s: %v", command, pe.Err)
	default:
		msg = fmt.Sprintf("cannot run %s: %v", command, err)
	}
	return &spawnError{msg: msg, err: err}
}

// workdirError returns why dir cannot be a working directory, nil if it can
// (or is ""). A failed chdir in the forked child comes back from exec as
// "fork/exec <command>: no such file or directory", like a missing command,
// so the directory is checked on its own.
func workdirError(dir string) error {
	if dir == "" {
		return nil
	}
	fi, err := os.Stat(dir)
	var pe *fs.PathError
	switch {
	case errors.As(err, &pe):
		return pe.Err
	case err != nil:
		return err
	case !fi.IsDir():
		return syscall.ENOTDIR
	}
	return nil
}
