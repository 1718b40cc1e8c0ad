package main

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain runs the command itself when the test binary is re-executed
// as the child of a test.
func TestMain(m *testing.M) {
	if os.Getenv("MCPECHO_TEST_CHILD") == "1" {
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

func child(t *testing.T, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(t.Context(), os.Args[0], args...)
	cmd.Env = append(os.Environ(), "MCPECHO_TEST_CHILD=1")
	return cmd
}

func TestStdio(t *testing.T) {
	cmd := child(t)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26"}}`+"\n"+
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"+
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"over stdio"}}}`+"\n")
	br := bufio.NewReader(stdout)
	for _, want := range []string{`"protocolVersion":"2025-03-26"`, `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"over stdio"}]}}`} {
		line, err := br.ReadString('\n')
		if err != nil || !strings.Contains(line, want) {
			t.Fatalf("reply %q, %v; want it to contain %s", line, err, want)
		}
	}
	stdin.Close() // EOF ends the server cleanly
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

// TestStdioStateless: over the real process's pipes, a request of
// 2026-07-28 is answered with no initialize before it, as the gateway's
// process for stateless requests needs (it probes with server/discover).
func TestStdioStateless(t *testing.T) {
	cmd := child(t)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	const meta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{`+meta+`}}`+"\n"+
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{`+meta+`,"name":"echo","arguments":{"message":"stateless"}}}`+"\n")
	br := bufio.NewReader(stdout)
	for _, want := range []string{`"supportedVersions":["2026-07-28",`, `{"jsonrpc":"2.0","id":2,"result":{"resultType":"complete","content":[{"type":"text","text":"stateless"}]}}`} {
		line, err := br.ReadString('\n')
		if err != nil || !strings.Contains(line, want) {
			t.Fatalf("reply %q, %v; want it to contain %s", line, err, want)
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

func TestHTTP(t *testing.T) {
	cmd := child(t, "--http", "127.0.0.1:0")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stderr).ReadString('\n')
	m := regexp.MustCompile(`msg=listening addr=(\S+)`).FindStringSubmatch(line)
	if err != nil || m == nil {
		cmd.Process.Kill()
		t.Fatalf("first stderr line %q, %v", line, err)
	}
	req, _ := http.NewRequestWithContext(t.Context(), "POST", "http://"+m[1]+"/mcp",
		strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18"}}`))
	req.Header.Set("Content-Type", "application/json")
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Mcp-Session-Id") == "" || !strings.Contains(string(body), `"2025-06-18"`) {
		t.Fatalf("initialize: %s %s", resp.Status, body)
	}
	// A stateless request needs no session.
	req, _ = http.NewRequestWithContext(t.Context(), "POST", "http://"+m[1]+"/mcp",
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",`+
			`"io.modelcontextprotocol/clientCapabilities":{}},"name":"echo","arguments":{"message":"hi"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "echo")
	if resp, err = (&http.Client{Transport: tr}).Do(req); err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != `{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","content":[{"type":"text","text":"hi"}]}}` {
		t.Fatalf("stateless call: %s %s", resp.Status, body)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
}

func TestUsage(t *testing.T) {
	var stderr strings.Builder
	if code := run([]string{"extra"}, strings.NewReader(""), io.Discard, &stderr); code != 2 {
		t.Errorf("exit %d, want 2; %s", code, stderr.String())
	}
	if code := run([]string{"--bogus"}, strings.NewReader(""), io.Discard, &stderr); code != 2 {
		t.Errorf("exit %d, want 2", code)
	}
	for _, burn := range []string{"-1ms", "2s"} {
		stderr.Reset()
		if code := run([]string{"--burn", burn}, strings.NewReader(""), io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), "--burn "+burn) {
			t.Errorf("--burn %s: exit %d, %q; want 2 naming the flag and value", burn, code, stderr.String())
		}
	}
}

// TestStdioScanBurn: the real process with --scan and --burn answers an
// echo as it does without them.
func TestStdioScanBurn(t *testing.T) {
	cmd := child(t, "--scan", "--burn", "200us")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}`+"\n"+
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"scanned"}}}`+"\n")
	br := bufio.NewReader(stdout)
	for _, want := range []string{`"protocolVersion":"2025-11-25"`, `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"scanned"}]}}` + "\n"} {
		line, err := br.ReadString('\n')
		if err != nil || !strings.Contains(line, want) {
			t.Fatalf("reply %q, %v; want it to contain %s", line, err, want)
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

// TestStdioMegabyte sends a 1 MiB message through the real process's pipes
// (what the gateway's children get) and checks the echo byte for byte.
func TestStdioMegabyte(t *testing.T) {
	cmd := child(t)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	msg := "big-" + strings.Repeat("x", 1<<20)
	go func() {
		io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"`+msg+`"}}}`+"\n")
		stdin.Close()
	}()
	out, err := io.ReadAll(stdout)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + msg + `"}]}}` + "\n"
	if string(out) != want {
		t.Fatalf("reply of %d bytes, want %d", len(out), len(want))
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

// TestStdioBrokenStdout: when the reader of stdout goes away, the next
// reply ends the process with SIGPIPE, Go's rule for descriptor 1, even
// though stdin stays open.
func TestStdioBrokenStdout(t *testing.T) {
	cmd := child(t)
	stdin, _ := cmd.StdinPipe()
	defer stdin.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	r.Close()
	io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatal("still running 10s after stdout broke")
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGPIPE {
		t.Fatalf("exit: %v, want death by SIGPIPE", err)
	}
}

// TestPollable: a pipe is made non-blocking for the run and put back after;
// anything else is left alone.
func TestPollable(t *testing.T) {
	// A blocking pipe, as the gateway hands its children (os.Pipe's is
	// non-blocking already).
	var fds [2]int
	if err := syscall.Pipe2(fds[:], syscall.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	rb, w := os.NewFile(uintptr(fds[0]), "r"), os.NewFile(uintptr(fds[1]), "w")
	defer rb.Close()
	defer w.Close()
	if nonblocking(t, rb) {
		t.Fatal("syscall.Pipe2 made a non-blocking pipe")
	}
	p, restore := pollable(rb)
	if p == rb || !nonblocking(t, p) {
		t.Fatal("a pipe was not made non-blocking")
	}
	go func() { w.Write([]byte("x")); w.Close() }()
	if b, err := io.ReadAll(p); string(b) != "x" || err != nil {
		t.Fatalf("read %q, %v through the pollable file", b, err)
	}
	restore()
	if nonblocking(t, rb) {
		t.Fatal("restore left the pipe non-blocking")
	}

	f, err := os.Create(t.TempDir() + "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, restore = pollable(f)
	defer restore()
	if p != f || nonblocking(t, f) {
		t.Fatal("a regular file was changed")
	}
}

func nonblocking(t *testing.T, f *os.File) bool {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var flags uintptr
	rc.Control(func(fd uintptr) { flags, _, _ = syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0) })
	return flags&syscall.O_NONBLOCK != 0
}
