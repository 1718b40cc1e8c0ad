package echoserver

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

func TestServeStdioAnswersInOrder(t *testing.T) {
	var in bytes.Buffer
	const n = 5000
	in.WriteString(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n\n  \r\n")
	for i := range n {
		fmt.Fprintf(&in, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"message":"m%d"}}}`+"\n", i, i)
	}
	in.WriteString(`{"jsonrpc":"2.0","id":"last","method":"ping"}`) // no final newline
	var out bytes.Buffer
	if err := ServeStdio(&in, &out); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(&out)
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
	var out bytes.Buffer
	if err := ServeStdio(strings.NewReader(in), &out); err != nil {
		t.Fatal(err)
	}
	want := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + long + `"}]}}` + "\n"
	if out.String() != want {
		t.Fatalf("reply of %d bytes, want %d", out.Len(), len(want))
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
	var out bytes.Buffer
	if err := ServeStdio(iotest.HalfReader(&in), &out); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want.Bytes()) {
		t.Fatalf("replies of %d bytes differ from the %d expected", out.Len(), want.Len())
	}
}
