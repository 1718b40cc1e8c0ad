package testkit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// envFake marks a process as a fake. Its value is the JSON of a fakeSpec.
const envFake = "MCPTEST_FAKE"

// markerFlag carries FakeOptions.Marker in argv, where /proc/<pid>/cmdline
// shows it. It is a flag, not a plain argument, so that a test binary whose
// TestMain forgot to call Main fails loudly ("flag provided but not defined")
// instead of running its own tests recursively.
const markerFlag = "-mcptest.fake="

// FakeOptions configures one fake server started with [Command]. The zero
// value is a well-behaved MCP server.
type FakeOptions struct {
	// RawEcho makes the fake a line echoer instead of an MCP server: every
	// stdin line is written back to stdout verbatim, in order. Lines starting
	// with '!' are commands instead:
	//
	//	!crash          exit with status 3 at once
	//	!exit N         exit with status N
	//	!partial TEXT   write TEXT without a newline, then exit 0
	//	!repeat N TEXT  write TEXT as N lines
	//	!big N          write one line of N 'x' bytes
	//	!stderr TEXT    write TEXT as a line to stderr
	RawEcho bool

	// IgnoreStdinEOF keeps the fake running after stdin reaches EOF (the spec
	// says a server should exit then); only a signal ends it.
	IgnoreStdinEOF bool

	// IgnoreSIGTERM makes the fake (and its grandchild) ignore SIGTERM, so
	// only SIGKILL ends it.
	IgnoreSIGTERM bool

	// SpawnGrandchild starts a sleeping grandchild at startup, in the fake's
	// process group and sharing its stdout and stderr, the way npx -> sh ->
	// node does. Its argv carries Marker too.
	SpawnGrandchild bool

	// GarbageBeforeInit writes a line that is not JSON at startup.
	GarbageBeforeInit bool

	// ListChangedBeforeInit sends notifications/tools/list_changed after
	// reading initialize but before replying to it, as the reference
	// "everything" server does.
	ListChangedBeforeInit bool

	// Modern makes the fake a dual-era server: it also answers
	// server/discover, listing protocol version 2026-07-28 (and the
	// session eras) in supportedVersions. Without it, server/discover is
	// an unknown method (-32601), as on a server of the session eras.
	Modern bool

	// ModernOnly makes a Modern fake a server of 2026-07-28 alone: it
	// refuses initialize (-32601, as a method the revision removed).
	ModernOnly bool

	// IgnoreDiscover makes the fake never answer server/discover, as some
	// servers of the session eras ignore every request before initialize.
	IgnoreDiscover bool

	// StrictInit makes the fake refuse every request but initialize and
	// ping until it has received notifications/initialized, as the Python
	// SDK's servers do.
	StrictInit bool

	// Stderr, if set, is written to stderr at startup, with a newline
	// after it: one line, or several separated by "\n".
	Stderr string

	// Tasks makes the fake a server of tasks (protocol 2025-11-25): see
	// tasks.go. Its task ids are global to the process.
	Tasks bool

	// ExitAtStart, when not 0, makes the fake exit with this status right
	// after writing Stderr, before reading anything: a server that cannot
	// start (a missing package, a bad token).
	ExitAtStart int

	// StartGate, if set, is the path of a named pipe (FIFO) the fake reads
	// to its end at startup, before it reads stdin: it is "downloading"
	// until the test opens the pipe for writing and closes it, the way a
	// first `npx -y` holds a server back for a minute, without a sleep.
	StartGate string

	// Marker is placed in the fake's argv (and its grandchild's) so that
	// [Procs] can find the processes. Use a value unique to the test.
	Marker string

	// Catalog shapes the fake's lists (see catalog.go).
	Catalog CatalogOptions
}

// fakeSpec is what travels in envFake.
type fakeSpec struct {
	Mode  string       `json:"mode"` // "mcp", "raw", "sleep" or "chaos"
	Opts  FakeOptions  `json:"opts"`
	Chaos ChaosOptions `json:"chaos"` // for mode "chaos" (see ChaosCommand)
}

// Command returns the command, arguments and extra environment that start the
// test binary itself as a fake server with opts. Pass env in addition to the
// current environment (exec.Cmd.Env = append(os.Environ(), env...)). The test
// binary's TestMain must call [Main] first. env sets MCPTEST_FAKE (the
// options) and GORACE (so a -race fake exits without the race runtime's 1s
// exit delay). Safe for concurrent use.
func Command(opts FakeOptions) (cmd string, args []string, env []string) {
	mode := "mcp"
	if opts.RawEcho {
		mode = "raw"
	}
	return command(fakeSpec{Mode: mode, Opts: opts})
}

func command(spec fakeSpec) (string, []string, []string) {
	exe, err := os.Executable()
	if err != nil {
		panic("testkit: cannot find the test binary: " + err.Error())
	}
	b, err := json.Marshal(spec)
	if err != nil {
		panic("testkit: " + err.Error())
	}
	// A -race binary sleeps 1s in os.Exit by default (atexit_sleep_ms), which
	// would make every fake exit look slow.
	race := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	return exe, []string{markerFlag + spec.Opts.Marker}, []string{envFake + "=" + string(b), "GORACE=" + race}
}

// Main must be called first thing in TestMain. If this process was started by
// [Command], Main runs the fake and exits the process; otherwise it returns at
// once and does nothing.
func Main() {
	v, ok := os.LookupEnv(envFake)
	if !ok {
		return
	}
	var spec fakeSpec
	if err := json.Unmarshal([]byte(v), &spec); err != nil {
		fmt.Fprintf(os.Stderr, "testkit: bad %s: %v\n", envFake, err)
		os.Exit(2)
	}
	// Children of the fake must not see the marker variable of their parent
	// unless they are fakes themselves.
	os.Unsetenv(envFake)
	os.Exit(runFake(spec))
}

func runFake(spec fakeSpec) int {
	o := spec.Opts
	if o.IgnoreSIGTERM {
		signal.Ignore(syscall.SIGTERM)
	}
	if spec.Mode == "sleep" {
		sleepForever()
	}
	if o.SpawnGrandchild {
		if err := spawnGrandchild(o); err != nil {
			fmt.Fprintf(os.Stderr, "testkit: grandchild: %v\n", err)
			return 2
		}
	}
	if spec.Mode == "chaos" {
		return runChaos(spec.Chaos)
	}
	if heldDown(o) {
		return 1
	}
	if o.Stderr != "" {
		fmt.Fprintln(os.Stderr, o.Stderr)
	}
	if o.ExitAtStart != 0 {
		return o.ExitAtStart
	}
	if o.StartGate != "" {
		if err := passGate(o.StartGate); err != nil {
			fmt.Fprintf(os.Stderr, "testkit: start gate: %v\n", err)
			return 2
		}
	}
	if o.GarbageBeforeInit {
		os.Stdout.WriteString("this line is not JSON-RPC\n")
	}
	if spec.Mode == "raw" {
		rawEcho(os.Stdin, os.Stdout)
	} else {
		newServer(o, os.Stdout).serve(os.Stdin)
	}
	// stdin reached EOF.
	if o.IgnoreStdinEOF {
		sleepForever()
	}
	return 0
}

// sleepForever blocks until a signal ends the process. A sleep loop, not
// select{}, because the runtime reports a process with no runnable goroutine
// and no timer as deadlocked.
func sleepForever() {
	for {
		time.Sleep(time.Hour)
	}
}

// spawnGrandchild starts a sleeping fake in our process group that shares our
// stdout and stderr. Nobody waits for it: it is reparented when we exit, which
// is exactly the leftover the supervisor must kill.
func spawnGrandchild(o FakeOptions) error {
	gc := FakeOptions{Marker: o.Marker, IgnoreSIGTERM: o.IgnoreSIGTERM}
	name, args, env := command(fakeSpec{Mode: "sleep", Opts: gc})
	c := exec.Command(name, args...)
	c.Env = append(os.Environ(), env...)
	c.Stdout = os.Stdout
	c.Stderr = os.Stderr
	return c.Start()
}

// rawEcho implements FakeOptions.RawEcho until EOF on r.
func rawEcho(r io.Reader, w io.Writer) {
	br := bufio.NewReaderSize(r, 64<<10)
	bw := bufio.NewWriterSize(w, 64<<10)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] != '\n' {
			line = append(line, '\n') // a final line without newline
		}
		if len(line) > 0 {
			if line[0] == '!' {
				bw.Flush()
				rawCommand(strings.TrimSuffix(string(line[1:]), "\n"), bw)
			} else {
				bw.Write(line)
			}
		}
		// Flush when no more input is waiting, so replies are prompt but a
		// burst of lines becomes few writes.
		if br.Buffered() == 0 || err != nil {
			bw.Flush()
		}
		if err != nil {
			return
		}
	}
}

func rawCommand(cmd string, bw *bufio.Writer) {
	verb, rest, _ := strings.Cut(cmd, " ")
	switch verb {
	case "crash":
		os.Exit(3)
	case "exit":
		n, _ := strconv.Atoi(rest)
		os.Exit(n)
	case "partial":
		os.Stdout.WriteString(rest)
		os.Exit(0)
	case "repeat":
		ns, text, _ := strings.Cut(rest, " ")
		n, _ := strconv.Atoi(ns)
		for range n {
			bw.WriteString(text)
			bw.WriteByte('\n')
		}
	case "big":
		n, _ := strconv.Atoi(rest)
		bw.WriteString(strings.Repeat("x", n))
		bw.WriteByte('\n')
	case "stderr":
		fmt.Fprintln(os.Stderr, rest)
	default:
		fmt.Fprintf(os.Stderr, "testkit: unknown raw command %q\n", verb)
	}
	bw.Flush()
}

// passGate blocks until the named pipe at path has had a writer and that
// writer closed it (FakeOptions.StartGate).
func passGate(path string) error {
	f, err := os.Open(path) // blocks until a writer opens it
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(io.Discard, f)
	return err
}
