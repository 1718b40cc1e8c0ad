package front

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Bodies read at once by several goroutines, in fragments of odd sizes
// and with announced lengths that are exact, unknown, short of what is
// sent or beyond it, all stay whole after every other body was read: the
// chunks readAll borrows go back to the pool and are lent again at once,
// so a body that still pointed into one would show another body's bytes.
// (Each body's bytes are its own: a pattern seeded by its number.)
func TestReadAllBodiesOutliveThePool(t *testing.T) {
	sizes := []int{0, 1, initialBodyBuf, initialBodyBuf + 1, 3*initialBodyBuf - 1, 100_003, maxBodyChunk - 1, maxBodyChunk + 4097}
	const readers, each = 4, 24
	kept := make([][][]byte, readers)
	want := make([][][]byte, readers)
	var wg sync.WaitGroup
	errs := make(chan error, readers)
	for g := range readers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 22))
			for i := range each {
				n := sizes[(g+i)%len(sizes)]
				body := make([]byte, n)
				for k := range body {
					body[k] = byte(g*31 + i*7 + k*13 + k>>11)
				}
				var announced int64
				switch i % 4 {
				case 0:
					announced = int64(n)
				case 1:
					announced = -1
				case 2:
					announced = int64(n / 2) // short: the rest must still be read
				case 3:
					announced = int64(n) + 5000
				}
				got, err := readAll(&oddReader{data: body, rng: rng}, announced)
				if err != nil || !bytes.Equal(got, body) {
					errs <- fmt.Errorf("reader %d body %d (%d bytes, announced %d): %d bytes back, err %v", g, i, n, announced, len(got), err)
					return
				}
				kept[g] = append(kept[g], got)
				want[g] = append(want[g], body)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for g := range readers {
		for i := range kept[g] {
			if !bytes.Equal(kept[g][i], want[g][i]) {
				t.Errorf("reader %d body %d changed after later bodies were read", g, i)
			}
		}
	}
}

// oddReader returns data in fragments of random sizes, sometimes its last
// bytes together with io.EOF (as a net/http body of known length does).
type oddReader struct {
	data []byte
	rng  *rand.Rand
}

func (r *oddReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), 1+r.rng.IntN(70_000))], r.data)
	r.data = r.data[n:]
	if len(r.data) == 0 && r.rng.IntN(2) == 0 {
		return n, io.EOF
	}
	return n, nil
}

// A chunked body (no announced length) in chunks of odd sizes is cut at
// MaxBodyBytes exactly: one byte under and at the limit it is read whole
// and answered; one byte over gets 413. A chunked body that stops mid-way
// gets 408 within BodyReadTimeout, as one of announced length does.
func TestChunkedBodyAtTheLimit(t *testing.T) {
	const limit = 64 << 10
	b := newFakeBackend()
	_, srv := testServer(t, b, Config{BodyReadTimeout: 300 * time.Millisecond, MaxBodyBytes: limit})
	const msg = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`
	for _, tc := range []struct {
		size   int
		status string
	}{
		{limit - 1, "200"},
		{limit, "200"},
		{limit + 1, "413"},
		{3 * limit, "413"},
	} {
		body := msg + strings.Repeat(" ", tc.size-len(msg)) // JSON allows trailing space
		if got := sendChunked(t, srv.Listener.Addr().String(), body, 4093, true); !strings.HasPrefix(got, tc.status) {
			t.Errorf("chunked body of %d bytes (limit %d): %s, want %s", tc.size, limit, got, tc.status)
		}
	}
	if got := sendChunked(t, srv.Listener.Addr().String(), msg[:20], 7, false); !strings.HasPrefix(got, "408") {
		t.Errorf("chunked body stopped mid-way: %s, want 408", got)
	}
}

// sendChunked POSTs body with chunked encoding in chunks of at most chunk
// bytes, ending it only if end is set, and returns the reply's status.
func sendChunked(t *testing.T, addr, body string, chunk int, end bool) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	w := bufio.NewWriter(c)
	fmt.Fprintf(w, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n", mcpPath)
	for rest := body; len(rest) > 0; {
		n := min(chunk, len(rest))
		fmt.Fprintf(w, "%x\r\n%s\r\n", n, rest[:n])
		rest = rest[n:]
	}
	if end {
		w.WriteString("0\r\n\r\n")
	}
	// The server may answer 413 and close before it read everything: a
	// failed write is no failure of the test, the status tells.
	_ = w.Flush()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the reply: %v", err)
	}
	resp.Body.Close()
	return resp.Status
}

// A body that announces more than it sends and then ends (the client
// half-closes its connection) is refused with 400 at once: the read ends
// with the connection's EOF, it does not wait out BodyReadTimeout, and
// nothing of it is taken as a message.
func TestBodyShorterThanAnnounced(t *testing.T) {
	b := newFakeBackend()
	_, srv := testServer(t, b, Config{BodyReadTimeout: time.Minute, MaxBodyBytes: 1 << 20})
	for _, sent := range []string{`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}`, strings.Repeat(" ", 40000)} {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n%s", mcpPath, len(sent)+1000, sent)
		if err := c.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		if err != nil {
			t.Fatalf("%d bytes of %d announced: %v", len(sent), len(sent)+1000, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%d bytes of %d announced: %s, want 400", len(sent), len(sent)+1000, resp.Status)
		}
	}
}
