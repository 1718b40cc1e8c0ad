package echoserver

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/iotest"
	"time"
)

// outputs are the two ways ServeStdio writes: through its writer goroutine
// (a bytes.Buffer) and from the reading goroutine (a non-blocking pipe, as
// cmd/mcpecho's stdout). Each serves in to out and returns what was written.
var outputs = []struct {
	name  string
	serve func(t *testing.T, in io.Reader) ([]byte, error)
}{
	{"buffer", func(t *testing.T, in io.Reader) ([]byte, error) {
		var out bytes.Buffer
		err := ServeStdio(in, &out)
		return out.Bytes(), err
	}},
	{"pipe", func(t *testing.T, in io.Reader) ([]byte, error) {
		r, w := pipe(t)
		if nonblockingConn(w) == nil {
			t.Fatal("os.Pipe's write end is not seen as non-blocking")
		}
		got := make(chan []byte, 1)
		go func() { b, _ := io.ReadAll(r); got <- b }()
		err := ServeStdio(in, w)
		w.Close()
		return <-got, err
	}},
}

// pipe returns an os.Pipe, both ends in Go's poller, closed at cleanup.
func pipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

func TestServeStdioAnswersInOrder(t *testing.T) {
	var in bytes.Buffer
	const n = 5000
	in.WriteString(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n\n  \r\n")
	for i := range n {
		fmt.Fprintf(&in, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"message":"m%d"}}}`+"\n", i, i)
	}
	in.WriteString(`{"jsonrpc":"2.0","id":"last","method":"ping"}`) // no final newline
	for _, o := range outputs {
		t.Run(o.name, func(t *testing.T) {
			out, err := o.serve(t, bytes.NewReader(in.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			checkInOrder(t, out, n)
		})
	}
}

func checkInOrder(t *testing.T, out []byte, n int) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(out))
	for i := range n {
		if !sc.Scan() {
			t.Fatalf("only %d replies", i)
		}
		want := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"m%d"}]}}`, i, i)
		if sc.Text() != want {
			t.Fatalf("reply %d = %s, want %s", i, sc.Text(), want)
		}
	}
	if !sc.Scan() || sc.Text() != `{"jsonrpc":"2.0","id":"last","result":{}}` {
		t.Fatalf("last reply = %q", sc.Text())
	}
	if sc.Scan() {
		t.Fatalf("extra output %q", sc.Text())
	}
}

func TestServeStdioLongLine(t *testing.T) {
	long := strings.Repeat("x", 300<<10) // several bufio buffers
	in := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"` + long + `"}}}` + "\n"
	want := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + long + `"}]}}` + "\n"
	for _, o := range outputs {
		t.Run(o.name, func(t *testing.T) {
			out, err := o.serve(t, strings.NewReader(in))
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != want {
				t.Fatalf("reply of %d bytes, want %d", len(out), len(want))
			}
		})
	}
}

// TestServeStdioReaderNeverWaitsOnWriter blocks the first write until the
// whole input has been read: if reading ever waited on writing, the input
// would never reach EOF.
func TestServeStdioReaderNeverWaitsOnWriter(t *testing.T) {
	const n = 20000 // far more than any pipe or bufio buffer holds
	var in bytes.Buffer
	for i := range n {
		fmt.Fprintf(&in, `{"jsonrpc":"2.0","id":%d,"method":"ping"}`+"\n", i)
	}
	eof := make(chan struct{})
	w := &gatedWriter{release: eof}
	done := make(chan error, 1)
	go func() { done <- ServeStdio(&eofReader{r: &in, eof: eof}, w) }()
	select {
	case <-eof:
	case <-time.After(10 * time.Second):
		t.Fatal("the reader stalled while the writer was blocked")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := bytes.Count(w.buf.Bytes(), []byte("\n")); got != n {
		t.Fatalf("%d replies, want %d", got, n)
	}
}

// eofReader closes eof when r returns io.EOF.
type eofReader struct {
	r   io.Reader
	eof chan struct{}
}

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		close(e.eof)
	}
	return n, err
}

// gatedWriter blocks every Write until release is closed.
type gatedWriter struct {
	release chan struct{}
	buf     bytes.Buffer
}

func (g *gatedWriter) Write(p []byte) (int, error) {
	<-g.release
	return g.buf.Write(p)
}

func TestServeStdioReportsWriteError(t *testing.T) {
	in := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n" + `{"jsonrpc":"2.0","id":2,"method":"ping"}` + "\n")
	err := ServeStdio(in, failingWriter{})
	if err == nil || !strings.Contains(err.Error(), "broken") {
		t.Fatalf("ServeStdio = %v, want the write error", err)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errBroken }

var errBroken = fmt.Errorf("stdout broken")

// TestServeStdioMegabyteLines echoes several 1 MiB messages in a row (the
// benchmarks' largest payload), each exactly, from a pipe that delivers
// them in small pieces.
func TestServeStdioMegabyteLines(t *testing.T) {
	const n = 4
	var in, want bytes.Buffer
	for i := range n {
		msg := fmt.Sprintf("m%d-", i) + strings.Repeat(string(rune('a'+i)), 1<<20)
		fmt.Fprintf(&in, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"message":"%s"}}}`+"\n", i, msg)
		fmt.Fprintf(&want, `{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"%s"}]}}`+"\n", i, msg)
	}
	for _, o := range outputs {
		t.Run(o.name, func(t *testing.T) {
			out, err := o.serve(t, iotest.HalfReader(bytes.NewReader(in.Bytes())))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out, want.Bytes()) {
				t.Fatalf("replies of %d bytes differ from the %d expected", len(out), want.Len())
			}
		})
	}
}

// TestServeStdioReaderNeverWaitsOnFullPipe is
// TestServeStdioReaderNeverWaitsOnWriter with a real non-blocking pipe,
// which the reading goroutine writes to itself: nobody reads the pipe until
// the input has been read to the end, so replies fill it early and the
// rest must be queued, not waited for.
func TestServeStdioReaderNeverWaitsOnFullPipe(t *testing.T) {
	const n = 20000 // some 700 KiB of replies, ten times a pipe's capacity
	var in bytes.Buffer
	for i := range n {
		fmt.Fprintf(&in, `{"jsonrpc":"2.0","id":%d,"method":"ping"}`+"\n", i)
	}
	eof := make(chan struct{})
	r, w := pipe(t)
	done := make(chan error, 1)
	go func() { done <- ServeStdio(&eofReader{r: &in, eof: eof}, w) }()
	select {
	case <-eof:
	case <-time.After(10 * time.Second):
		t.Fatal("the reader stalled on a full pipe")
	}
	got := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(r); got <- b }()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	w.Close()
	lines := bytes.SplitAfter(<-got, []byte("\n"))
	if len(lines) != n+1 {
		t.Fatalf("%d replies, want %d", len(lines)-1, n)
	}
	for i, line := range lines[:n] {
		if want := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"result":{}}`+"\n", i); string(line) != want {
			t.Fatalf("reply %d = %q, want %q", i, line, want)
		}
	}
}

// TestServeStdioPipesInterleaved feeds requests in bursts through a pipe
// while the output pipe is drained in small reads, so that output passes
// back and forth between direct writes, partial writes and the queue (big
// messages overflow the pipe); every reply must arrive whole and in order.
func TestServeStdioPipesInterleaved(t *testing.T) {
	const bursts, per = 50, 40
	inR, inW := pipe(t)
	outR, outW := pipe(t)
	var want bytes.Buffer
	var wg sync.WaitGroup
	wg.Go(func() {
		defer inW.Close()
		var b []byte
		for i := range bursts * per {
			msg := fmt.Sprintf("m%d", i)
			if i%97 == 0 {
				msg += strings.Repeat("x", 200<<10)
			}
			b = fmt.Appendf(b, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"message":"%s"}}}`+"\n", i, msg)
			fmt.Fprintf(&want, `{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","text":"%s"}]}}`+"\n", i, msg)
			if i%per == per-1 {
				if _, err := inW.Write(b); err != nil {
					t.Error(err)
					return
				}
				b = b[:0]
			}
		}
	})
	var got bytes.Buffer
	wg.Go(func() {
		buf := make([]byte, 1000)
		for {
			n, err := outR.Read(buf)
			got.Write(buf[:n])
			if err != nil {
				return
			}
		}
	})
	err := ServeStdio(inR, outW)
	outW.Close()
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Bytes(), want.Bytes()) {
		t.Fatalf("%d bytes of replies differ from the %d expected", got.Len(), want.Len())
	}
}

// TestServeStdioReportsPipeError: when the pipe's reader is gone, the
// direct write's EPIPE is reported (descriptors other than 1 and 2 get no
// SIGPIPE in Go) and the rest of the input is still read.
func TestServeStdioReportsPipeError(t *testing.T) {
	r, w := pipe(t)
	r.Close()
	in := strings.NewReader(strings.Repeat(`{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n", 1000))
	err := ServeStdio(in, w)
	if !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("ServeStdio = %v, want EPIPE", err)
	}
	if in.Len() != 0 {
		t.Fatalf("%d bytes of input left unread", in.Len())
	}
}

// TestNonblockingConn: only a descriptor in non-blocking mode is written
// from the reading goroutine; a blocking one could stall it.
func TestNonblockingConn(t *testing.T) {
	f, err := os.Create(t.TempDir() + "/out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if nonblockingConn(f) != nil {
		t.Error("a regular file is taken for non-blocking")
	}
	if nonblockingConn(&bytes.Buffer{}) != nil {
		t.Error("a bytes.Buffer is taken for a descriptor")
	}
	_, w := pipe(t)
	if nonblockingConn(w) == nil {
		t.Error("os.Pipe's write end is not taken for non-blocking")
	}
}

// TestServeStdioStateless: a dual-era stream, through both outputs, as a
// process behind the gateway sees it: stateless requests answered with no
// initialize before them, then a session's, each in its era's shape.
func TestServeStdioStateless(t *testing.T) {
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	in := `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{` + meta + `}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{` + meta + `,"name":"echo","arguments":{"message":"s1"}}}` + "\n" +
		`{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}` + "\n" +
		`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n" +
		`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","arguments":{"message":"l1"}}}` + "\n" +
		`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{` + meta + `,"name":"echo","arguments":{"message":"s2"}}}` + "\n"
	want := `{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","supportedVersions":["2026-07-28","2025-11-25","2025-06-18","2025-03-26"],` +
		`"capabilities":{"tools":{}},"ttlMs":0,"cacheScope":"public","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"mcpecho","version":"1.0.0"}}}}` + "\n" +
		`{"jsonrpc":"2.0","id":2,"result":{"resultType":"complete","content":[{"type":"text","text":"s1"}]}}` + "\n" +
		`{"jsonrpc":"2.0","id":3,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"mcpecho","version":"1.0.0"}}}` + "\n" +
		`{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"l1"}]}}` + "\n" +
		`{"jsonrpc":"2.0","id":5,"result":{"resultType":"complete","content":[{"type":"text","text":"s2"}]}}` + "\n"
	for _, o := range outputs {
		t.Run(o.name, func(t *testing.T) {
			out, err := o.serve(t, strings.NewReader(in))
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != want {
				t.Fatalf("replies\n%s\nwant\n%s", out, want)
			}
		})
	}
}
