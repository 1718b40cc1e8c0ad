package testkit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// ChaosOptions scripts a misbehaving stdio MCP server for fault-injection
// tests. Started with [ChaosCommand], the server is the well-behaved fake
// (echo and the other tools of [FakeOptions]) plus the faults selected
// here; the zero value adds none. Each fault that happens "after
// initialize" happens right after the reply to initialize is written,
// before stdin is read again.
type ChaosOptions struct {
	// Marker is placed in argv so that [Procs] finds the processes.
	Marker string

	// Journal, if set, is a file the server appends one line to per event,
	// so a test can wait on the server's progress instead of sleeping:
	// "start PID UNIXNANO" at startup, "crash PID UNIXNANO" just before
	// CrashAfter ends the process, "called TOOL" when a tools/call is read,
	// "stopped-reading" when StopReadingAfter takes effect, "burst-paused"
	// at PingBurstGate, "burst-done" after PingBurst, "replied TOOL" after
	// the reply of a tools/call is written, "background-log" after the
	// bglog tool's late message is written, "stalled" and "resumed" around
	// the stall tool's wait.
	Journal string

	// ExitAtStart makes the server write StartupStderr to stderr and exit
	// at once with ExitCode (default 1), before reading anything.
	ExitAtStart bool
	// ExitCode is the status of ExitAtStart. Default 1.
	ExitCode int
	// StartupStderr is written as one line to stderr at startup.
	StartupStderr string

	// SlowStarts makes the first SlowStarts starts (counted in Journal,
	// which must then be set) reply to initialize only after InitDelay.
	// With SlowStarts 0 every start is slow when InitDelay is set.
	SlowStarts int
	// InitDelay delays the reply to initialize.
	InitDelay time.Duration

	// CrashAfter makes the server exit with status 4 after this much
	// uptime. Default 0: never.
	CrashAfter time.Duration

	// StopReadingAfter makes the server stop reading stdin for good after
	// this many requests (initialize counts as one). Default 0: never.
	StopReadingAfter int

	// PingBurst sends this many ping requests after initialize without
	// reading stdin meanwhile (a single-threaded server does this), then
	// reads on. The gateway's answers are discarded.
	PingBurst int
	// PingBurstGate, if set, is a [Gate] path: halfway through PingBurst
	// the server journals "burst-paused" and waits at the gate, so that a
	// test acts while the burst is provably under way.
	PingBurstGate string

	// GarbageLines writes this many lines that are not JSON after
	// initialize.
	GarbageLines int

	// HugeLineBytes writes one notifications/message line of about this
	// many bytes after initialize.
	HugeLineBytes int

	// UnroutableRequests sends this many sampling/createMessage requests
	// after initialize, when no client asked for anything. Answers are
	// discarded.
	UnroutableRequests int

	// StderrFlood writes to stderr as fast as the pipe takes it, from
	// startup until the process ends.
	StderrFlood bool

	// SpawnGrandchild starts a sleeping grandchild holding stdout and
	// stderr, like [FakeOptions.SpawnGrandchild].
	SpawnGrandchild bool

	// IgnoreSIGTERM makes the server (and its grandchild) ignore SIGTERM.
	IgnoreSIGTERM bool
}

// Tools the chaos server adds to the fake's:
//
//	flood {"count":N}  sends N notifications/progress for the request's
//	                   progress token (or token "flood" without one), then
//	                   replies "flooded N".
//	bglog {"message":M,"ms":D}  replies "scheduled" at once, then after D ms
//	                   sends notifications/message with data M: work in the
//	                   background of the session that called it.
//	environ            replies with the process's environment, one
//	                   NAME=VALUE per line.
//	stall {"gate":P}   stops reading stdin (journals "stalled") until the
//	                   [Gate] at path P is opened, then replies "resumed"
//	                   (journals "resumed") and reads on: a server stuck
//	                   for as long as the test chooses, that recovers.
const (
	chaosToolFlood   = "flood"
	chaosToolBgLog   = "bglog"
	chaosToolEnviron = "environ"
	chaosToolStall   = "stall"
)

// ChaosCommand is [Command] for a chaos server: the command, arguments and
// extra environment that start the test binary as a server misbehaving as
// opts says. The test binary's TestMain (or an init function) must call
// [Main] first. Safe for concurrent use.
func ChaosCommand(opts ChaosOptions) (cmd string, args []string, env []string) {
	return command(fakeSpec{Mode: "chaos", Opts: FakeOptions{
		Marker: opts.Marker, IgnoreSIGTERM: opts.IgnoreSIGTERM, SpawnGrandchild: opts.SpawnGrandchild,
	}, Chaos: opts})
}

// JournalLines returns the lines of a chaos server's journal that start
// with prefix (all lines for ""). A missing file has none.
func JournalLines(path, prefix string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

// chaos is the running chaos server: the fake's server plus the faults.
type chaos struct {
	o ChaosOptions
	s *server
}

// runChaos runs a chaos server until stdin ends (or forever when it stops
// reading). It returns the exit status. The caller has already handled
// IgnoreSIGTERM and SpawnGrandchild.
func runChaos(o ChaosOptions) int {
	c := &chaos{o: o, s: newServer(FakeOptions{Marker: o.Marker}, os.Stdout)}
	c.journal(fmt.Sprintf("start %d %d", os.Getpid(), time.Now().UnixNano()))
	if o.StartupStderr != "" {
		fmt.Fprintln(os.Stderr, o.StartupStderr)
	}
	if o.ExitAtStart {
		if o.ExitCode == 0 {
			return 1
		}
		return o.ExitCode
	}
	if o.StderrFlood {
		go floodStderr()
	}
	if o.CrashAfter > 0 {
		time.AfterFunc(o.CrashAfter, func() {
			c.journal(fmt.Sprintf("crash %d %d", os.Getpid(), time.Now().UnixNano()))
			os.Exit(4)
		})
	}
	c.serve(os.Stdin)
	return 0
}

func floodStderr() {
	line := []byte(strings.Repeat("stderr flood ", 80) + "\n")
	buf := bytes.Repeat(line, 64)
	for {
		if _, err := os.Stderr.Write(buf); err != nil {
			return
		}
	}
}

// journal appends one event line to o.Journal. O_APPEND writes of one short
// line are atomic, so concurrent servers may share a journal.
func (c *chaos) journal(event string) {
	if c.o.Journal == "" {
		return
	}
	f, err := os.OpenFile(c.o.Journal, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	f.WriteString(event + "\n")
	f.Close()
}

func (c *chaos) serve(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	requests := 0
	for {
		line, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var m message
			if json.Unmarshal(line, &m) == nil && m.Method != "" && len(m.ID) > 0 {
				requests++
				c.request(m, line)
			} else {
				c.s.dispatch(line)
			}
			if c.o.StopReadingAfter > 0 && requests >= c.o.StopReadingAfter {
				c.journal("stopped-reading")
				sleepForever()
			}
		}
		if err != nil {
			c.s.wg.Wait()
			return
		}
	}
}

// request handles one request line, running the faults tied to it.
func (c *chaos) request(m message, line []byte) {
	switch m.Method {
	case "initialize":
		if c.o.InitDelay > 0 && (c.o.SlowStarts == 0 || len(JournalLines(c.o.Journal, "start ")) <= c.o.SlowStarts) {
			time.Sleep(c.o.InitDelay)
		}
		c.s.initialize(m) // inline: the faults below follow the reply
		c.afterInitialize()
		return
	case "tools/call":
		var p callParams
		_ = json.Unmarshal(m.Params, &p)
		c.journal("called " + p.Name)
		if p.Name == chaosToolStall {
			c.stall(m, p) // inline: nothing more is read until it returns
			return
		}
		switch p.Name {
		case chaosToolFlood, chaosToolBgLog, chaosToolEnviron:
			c.s.wg.Go(func() { c.tool(m, p) })
			return
		}
		// As dispatch does, registered before handing off so that a
		// cancellation that follows at once finds its request.
		done := make(chan struct{})
		key := idKey(m.ID)
		c.s.mu.Lock()
		c.s.inflight[key] = &inflightReq{done: done, rec: callRecord{Method: m.Method, Params: m.Params}}
		c.s.mu.Unlock()
		c.s.wg.Go(func() {
			c.s.handleRequest(m, done)
			c.s.mu.Lock()
			if r := c.s.inflight[key]; r != nil && r.done == done {
				delete(c.s.inflight, key)
			}
			c.s.mu.Unlock()
			c.journal("replied " + p.Name)
		})
		return
	}
	c.s.dispatch(line)
}

func (c *chaos) afterInitialize() {
	o := c.o
	for i := range o.PingBurst {
		if o.PingBurstGate != "" && i == o.PingBurst/2 {
			c.journal("burst-paused")
			if err := passGate(o.PingBurstGate); err != nil {
				fmt.Fprintf(os.Stderr, "testkit: ping burst gate: %v\n", err)
			}
		}
		c.s.write(message{ID: json.RawMessage(fmt.Sprintf(`"burst-%d"`, i)), Method: "ping"})
	}
	if o.PingBurst > 0 {
		c.journal("burst-done")
	}
	for range o.GarbageLines {
		c.s.wmu.Lock()
		os.Stdout.WriteString("garbage: this line is not JSON-RPC {[\n")
		c.s.wmu.Unlock()
	}
	if o.HugeLineBytes > 0 {
		// Built by hand: encoding/json on 50 MB is slow in a -race binary.
		line := append([]byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"`),
			bytes.Repeat([]byte("h"), o.HugeLineBytes)...)
		line = append(line, "\"}}\n"...)
		c.s.wmu.Lock()
		os.Stdout.Write(line)
		c.s.wmu.Unlock()
	}
	for i := range o.UnroutableRequests {
		c.s.write(message{ID: json.RawMessage(fmt.Sprintf(`"unroutable-%d"`, i)), Method: "sampling/createMessage",
			Params: mustJSON(map[string]any{"messages": []any{}, "maxTokens": 1})})
	}
}

// tool runs one of the chaos tools.
func (c *chaos) tool(m message, p callParams) {
	var a struct {
		Count   int     `json:"count"`
		Message string  `json:"message"`
		MS      float64 `json:"ms"`
	}
	_ = json.Unmarshal(p.Arguments, &a)
	switch p.Name {
	case chaosToolFlood:
		tok := p.Meta.ProgressToken
		if len(tok) == 0 || string(tok) == "null" {
			tok = json.RawMessage(`"flood"`)
		}
		for i := 1; i <= a.Count; i++ {
			c.s.notify("notifications/progress", map[string]any{"progressToken": tok, "progress": i, "total": a.Count})
		}
		c.s.reply(m.ID, textResult(fmt.Sprintf("flooded %d", a.Count), false))
	case chaosToolBgLog:
		c.s.reply(m.ID, textResult("scheduled", false))
		time.Sleep(time.Duration(a.MS * float64(time.Millisecond)))
		c.s.notify("notifications/message", map[string]any{"level": "error", "logger": "background", "data": a.Message})
		c.journal("background-log")
	case chaosToolEnviron:
		c.s.reply(m.ID, textResult(strings.Join(os.Environ(), "\n"), false))
	}
	c.journal("replied " + p.Name)
}

// stall runs the stall tool on the reading goroutine: stdin is not read
// until its gate opens.
func (c *chaos) stall(m message, p callParams) {
	var a struct {
		Gate string `json:"gate"`
	}
	_ = json.Unmarshal(p.Arguments, &a)
	c.journal("stalled")
	if err := passGate(a.Gate); err != nil {
		c.s.reply(m.ID, textResult("stall gate: "+err.Error(), true))
		return
	}
	c.journal("resumed")
	c.s.reply(m.ID, textResult("resumed", false))
}
