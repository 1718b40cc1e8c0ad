package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/mcpgate/mcpgate/internal/loadgen"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

var benchCmd = command{
	name: "bench",
	synopses: []string{
		"bench --url URL [--sessions N] [--concurrency C] [--size BYTES] [--duration D] [--warmup D] [--open-parallel P] [--proc PID] [--json]",
		"bench --url URL --idle N [--streams M] [--hold D] [--json]",
	},
	summary: "load-test an MCP endpoint (the gateway or a server) and check every reply",
	about: `Bench opens sessions on the Streamable HTTP endpoint URL and has each
session call the tool "echo" (cmd/mcpecho serves it) with a message
unique to the call, from --concurrency callers per session at once, for
--warmup and then the measured --duration. Every reply must carry its
caller's own id and message: a reply that belongs to another call counts
as crossed, any other failure as an error. A server whose echo does not
return its message at all (its replies carry no message sent) is told in
one line: its replies cannot be checked. It prints calls per second and
latency percentiles of the measured calls, and exits 1 if there was any
error or crossed reply, or the server does not echo.

With --size each message is BYTES long (its unique part first, then ASCII
filler) and the payload rate is reported too, in MB/s (10^6 bytes) each
way. Opening a session (initialize, notifications/initialized and a first
tools/call with a short message) is timed per session and reported as
open latency; --open-parallel 1 opens the sessions one after another, so
that each open measures startup rather than contention.

With --proc PID it also reads, from /proc, the CPU time (utime+stime)
and context switches (voluntary and involuntary, over its threads) of
process PID and of its children at the start and the end of the
measured window, and reports them per call measured: what a call costs
the server or gateway at PID (and its stdio children), a figure that a
busy machine disturbs far less than calls per second. PID must be on
this machine (Linux).

--version 2026-07-28 (the stateless revision) has no initialize and no
session: each of the N sessions is then a client that opens with one
server/discover (timed up to its first call's reply, as an open is) and
makes stateless calls, each carrying the revision's _meta and headers;
its results must also say "resultType":"complete".

With --idle N it measures capacity instead: it opens N sessions, the
first --streams of them with a GET stream held open, holds them for
--hold (or until interrupted), prints how many opened and failed, then
deletes them. It exits 1 if any failed. It needs a version with sessions
(not 2026-07-28).

Progress goes to stderr once a second; the result to stdout, as a table
or, with --json, as one JSON object.`,
}

// headerFlags collects repeated --header 'Name: value' flags.
type headerFlags http.Header

func (h headerFlags) String() string { return "" }

func (h headerFlags) Set(v string) error {
	name, value, ok := strings.Cut(v, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.ContainsAny(name, " \t") {
		return fmt.Errorf("want 'Name: value', got %q", v)
	}
	http.Header(h).Add(name, strings.TrimSpace(value))
	return nil
}

// benchJSON is the --json output of a load run.
type benchJSON struct {
	Sessions    int     `json:"sessions"`
	Concurrency int     `json:"concurrency"`
	DurationS   float64 `json:"duration_s"`
	Calls       uint64  `json:"calls"`
	CallsPerSec float64 `json:"calls_per_sec"`
	// BytesPerCall is the mean message length of the measured calls and
	// MBPerSec their message bytes per second, each way, in 10^6 bytes.
	BytesPerCall float64 `json:"bytes_per_call"`
	MBPerSec     float64 `json:"mb_per_sec"`
	P50us        float64 `json:"p50_us"`
	P90us        float64 `json:"p90_us"`
	P99us        float64 `json:"p99_us"`
	MaxUs        float64 `json:"max_us"`
	// Opened counts the sessions whose open was timed; OpenP50us and
	// OpenP99us are percentiles of that time (initialize to the reply of
	// the first tools/call).
	Opened     uint64  `json:"opened"`
	OpenP50us  float64 `json:"open_p50_us"`
	OpenP99us  float64 `json:"open_p99_us"`
	Errors     uint64  `json:"errors"`
	Crossed    uint64  `json:"crossed"`
	NotEchoed  uint64  `json:"not_echoed"`
	FirstError string  `json:"first_error,omitempty"`
	*procJSON
}

// idleJSON is the --json output of an idle run.
type idleJSON struct {
	Sessions      int     `json:"sessions"`
	Opened        int     `json:"opened"`
	Failed        int     `json:"failed"`
	Streams       int     `json:"streams"`
	StreamsFailed int     `json:"streams_failed"`
	HeldS         float64 `json:"held_s"`
	FirstError    string  `json:"first_error,omitempty"`
}

// bench implements `mcpgate bench`.
func bench(args []string, stdout, stderr io.Writer) int {
	c := &benchCmd
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	url := fs.String("url", "", "the MCP endpoint `URL`, e.g. http://127.0.0.1:8080/servers/echo/mcp (required)")
	sessions := fs.Int("sessions", 32, "open `N` sessions")
	concurrency := fs.Int("concurrency", 1, "run `C` callers per session, each with one call in flight")
	size := fs.Int("size", 0, "make each message `BYTES` long (default: a short unique message)")
	openParallel := fs.Int("open-parallel", 64, "open `P` sessions at a time (1: one after another)")
	duration := fs.Duration("duration", 10*time.Second, "measure for `D` (and until one call begun in it has ended)")
	warmup := fs.Duration("warmup", time.Second, "run for `D` before measuring (not counted in throughput or latency)")
	version := fs.String("version", protocol.LatestSessionVersion, "speak protocol version `V` (asked for in initialize; "+protocol.StatelessVersion+": stateless, no initialize)")
	asJSON := fs.Bool("json", false, "print the result as one JSON object")
	idle := fs.Int("idle", 0, "idle mode: open `N` sessions and hold them instead of calling")
	streams := fs.Int("streams", 0, "idle mode: `M` of the sessions also hold a GET stream open")
	hold := fs.Duration("hold", 0, "idle mode: hold the sessions for `D` (default: until interrupted)")
	procPID := fs.Int("proc", 0, "report the CPU time and context switches per call of process `PID` and its children over the measured window (from /proc)")
	header := headerFlags{}
	fs.Var(header, "header", "send the header `'Name: value'` on every request (repeatable)")
	if code, done := parseFlags(c, fs, args, stdout, stderr); done {
		return code
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case fs.NArg() > 0:
		return usageError(stderr, c, "unexpected argument %q", fs.Arg(0))
	case *url == "":
		return usageError(stderr, c, "--url URL is required")
	case !strings.HasPrefix(*url, "http://") && !strings.HasPrefix(*url, "https://"):
		return usageError(stderr, c, "--url must be an http:// or https:// URL")
	case *version == "":
		return usageError(stderr, c, "--version must not be empty")
	case *idle < 0:
		return usageError(stderr, c, "--idle must be positive")
	case *idle == 0 && (set["streams"] || set["hold"]):
		return usageError(stderr, c, "--streams and --hold need --idle N")
	case *idle > 0 && (*streams < 0 || *streams > *idle):
		return usageError(stderr, c, "--streams must be between 0 and --idle")
	case *idle > 0 && *hold < 0:
		return usageError(stderr, c, "--hold must not be negative")
	case *idle == 0 && (*sessions <= 0 || *concurrency <= 0):
		return usageError(stderr, c, "--sessions and --concurrency must be positive")
	case *idle == 0 && (*duration <= 0 || *warmup < 0):
		return usageError(stderr, c, "--duration must be positive and --warmup not negative")
	case *size < 0 || *size > loadgen.MaxSize:
		return usageError(stderr, c, "--size must be between 0 and %d", loadgen.MaxSize)
	case *openParallel <= 0:
		return usageError(stderr, c, "--open-parallel must be positive")
	case *idle > 0 && (set["size"] || set["open-parallel"] || set["proc"]):
		return usageError(stderr, c, "--size, --open-parallel and --proc do not apply to --idle")
	case set["proc"] && *procPID <= 0:
		return usageError(stderr, c, "--proc must be a process id, got %d", *procPID)
	case *idle > 0 && loadgen.Stateless(*version):
		return usageError(stderr, c, "--idle holds sessions, and protocol version %s has none", *version)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *idle > 0 {
		return benchIdle(ctx, loadgen.IdleOptions{
			URL: *url, Sessions: *idle, Streams: *streams, Hold: *hold,
			Version: *version, Header: http.Header(header),
			Progress: func(p loadgen.IdleProgress) {
				fmt.Fprintf(stderr, "bench: %s %4.0fs opened=%d failed=%d streams=%d\n",
					p.Phase, p.Elapsed.Seconds(), p.Opened, p.Failed, p.Streams)
			},
		}, *asJSON, stdout, stderr)
	}

	var proc *procWindow
	var window func(bool)
	if *procPID > 0 {
		proc = &procWindow{pid: *procPID}
		window = proc.window
	}
	var lastCalls uint64
	var lastAt time.Duration
	res, err := loadgen.Run(ctx, loadgen.Options{
		URL: *url, Sessions: *sessions, Concurrency: *concurrency, Size: *size, OpenParallel: *openParallel,
		Duration: *duration, Warmup: *warmup, Version: *version, Header: http.Header(header), Window: window,
		Progress: func(p loadgen.Progress) {
			rate := float64(p.Calls-lastCalls) / (p.Elapsed - lastAt).Seconds()
			lastCalls, lastAt = p.Calls, p.Elapsed
			fmt.Fprintf(stderr, "bench: %s %4.0fs opened=%d calls=%d (%.0f/s) errors=%d crossed=%d%s\n",
				p.Phase, p.Elapsed.Seconds(), p.Opened, p.Calls, rate, p.Errors, p.Crossed, notEchoed(p.NotEchoed))
		},
	})
	if err != nil && res.Elapsed == 0 {
		fmt.Fprintf(stderr, "mcpgate bench: %v\n", err)
		return exitFailure
	}
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	var perCall float64
	if res.Calls > 0 {
		perCall = float64(res.PayloadBytes) / float64(res.Calls)
	}
	var pj *procJSON
	var procErr error
	if proc != nil {
		var v procJSON
		if v, procErr = proc.result(res.Calls); procErr == nil {
			pj = &v
		}
	}
	if *asJSON {
		out, _ := json.Marshal(benchJSON{
			procJSON: pj,
			Sessions: res.Sessions, Concurrency: res.Concurrency, DurationS: res.Elapsed.Seconds(),
			Calls: res.Calls, CallsPerSec: res.CallsPerSec,
			BytesPerCall: perCall, MBPerSec: res.BytesPerSec / 1e6,
			P50us: us(res.P(0.50)), P90us: us(res.P(0.90)), P99us: us(res.P(0.99)), MaxUs: us(res.Latency.Max()),
			Opened: res.Open.Count(), OpenP50us: us(res.Open.Quantile(0.50)), OpenP99us: us(res.Open.Quantile(0.99)),
			Errors: res.Errors, Crossed: res.Crossed, NotEchoed: res.NotEchoed, FirstError: res.FirstError,
		})
		fmt.Fprintf(stdout, "%s\n", out)
	} else {
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "url\t%s (version %s)\n", *url, *version)
		fmt.Fprintf(tw, "sessions\t%d x %d callers\n", res.Sessions, res.Concurrency)
		fmt.Fprintf(tw, "measured\t%.1fs after %s warmup\n", res.Elapsed.Seconds(), *warmup)
		fmt.Fprintf(tw, "calls\t%d\n", res.Calls)
		fmt.Fprintf(tw, "calls/s\t%.0f\n", res.CallsPerSec)
		fmt.Fprintf(tw, "payload\t%.0f bytes per call\t%.2f MB/s each way\n", perCall, res.BytesPerSec/1e6)
		fmt.Fprintf(tw, "latency\tp50 %.0f µs\tp90 %.0f µs\tp99 %.0f µs\tmax %.0f µs\n",
			us(res.P(0.50)), us(res.P(0.90)), us(res.P(0.99)), us(res.Latency.Max()))
		fmt.Fprintf(tw, "open\tp50 %.0f µs\tp99 %.0f µs\t(%d sessions, %d at a time)\n",
			us(res.Open.Quantile(0.50)), us(res.Open.Quantile(0.99)), res.Open.Count(), *openParallel)
		fmt.Fprintf(tw, "errors\t%d\n", res.Errors)
		fmt.Fprintf(tw, "crossed\t%d\n", res.Crossed)
		if res.NotEchoed > 0 {
			fmt.Fprintf(tw, "not echoed\t%d\n", res.NotEchoed)
		}
		if pj != nil {
			fmt.Fprintf(tw, "pid %d\t%.1f µs CPU per call\t%.2f context switches per call\n", pj.PID, pj.CPUusPerCall, pj.SwitchesPerCall)
			fmt.Fprintf(tw, "its %d children\t%.1f µs CPU per call\t%.2f context switches per call\n", pj.Children, pj.ChildrenCPUusPerCall, pj.ChildrenSwitchesPerCall)
		}
		_ = tw.Flush()
	}
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "mcpgate bench: stopped early: %v\n", err)
		return exitFailure
	case res.NotEchoed > 0:
		// One line, instead of every reply counted as crossed: the server
		// is not one this command can check, which is no routing bug.
		fmt.Fprintf(stderr, "mcpgate bench: the server's \"echo\" tool does not return its message (%d replies carried no message sent; %d errors, %d crossed): replies cannot be checked; bench a server whose echo returns its message, such as mcpecho\n",
			res.NotEchoed, res.Errors, res.Crossed)
		return exitFailure
	case res.Errors > 0 || res.Crossed > 0:
		fmt.Fprintf(stderr, "mcpgate bench: %d errors, %d crossed replies; first error: %s\n", res.Errors, res.Crossed, res.FirstError)
		return exitFailure
	case procErr != nil:
		fmt.Fprintf(stderr, "mcpgate bench: %v\n", procErr)
		return exitFailure
	}
	return exitOK
}

// benchIdle runs idle mode and prints its result.
func benchIdle(ctx context.Context, o loadgen.IdleOptions, asJSON bool, stdout, stderr io.Writer) int {
	res, err := loadgen.Idle(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "mcpgate bench: %v\n", err)
		return exitFailure
	}
	if asJSON {
		out, _ := json.Marshal(idleJSON{
			Sessions: res.Sessions, Opened: res.Opened, Failed: res.Failed,
			Streams: res.Streams, StreamsFailed: res.StreamsFailed,
			HeldS: res.Held.Seconds(), FirstError: res.FirstError,
		})
		fmt.Fprintf(stdout, "%s\n", out)
	} else {
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "url\t%s\n", o.URL)
		fmt.Fprintf(tw, "sessions\t%d opened of %d, %d failed\n", res.Opened, res.Sessions, res.Failed)
		fmt.Fprintf(tw, "streams\t%d opened of %d, %d failed\n", res.Streams, o.Streams, res.StreamsFailed)
		fmt.Fprintf(tw, "held\t%.1fs\n", res.Held.Seconds())
		_ = tw.Flush()
	}
	if res.Failed > 0 || res.StreamsFailed > 0 {
		fmt.Fprintf(stderr, "mcpgate bench: %d sessions and %d streams failed; first error: %s\n", res.Failed, res.StreamsFailed, res.FirstError)
		return exitFailure
	}
	return exitOK
}

// notEchoed is the progress line's count of replies without an echo, when
// there are any.
func notEchoed(n uint64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" not_echoed=%d", n)
}
