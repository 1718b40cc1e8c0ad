package stdio

import (
	"os"
	"syscall"
	"testing"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// fGetPipeSize is Linux's F_GETPIPE_SZ.
const fGetPipeSize = 1032

func pipeSize(t *testing.T, f *os.File) int {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n uintptr
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		n, _, errno = syscall.Syscall(syscall.SYS_FCNTL, fd, fGetPipeSize, 0)
	}); err != nil || errno != 0 {
		t.Fatalf("F_GETPIPE_SZ: %v %v", err, errno)
	}
	return int(n)
}

// TestPipeBytes: PipeBytes sets the capacity of the child's stdin and
// stdout pipes; without it they keep the system default.
func TestPipeBytes(t *testing.T) {
	for _, want := range []int{0, 1 << 20} {
		cfg := fakeConfig(t, testkit.FakeOptions{})
		cfg.PipeBytes = want
		s, r := start(t, cfg)
		r.waitEvent("started", 1)
		s.mu.Lock()
		p := s.cur
		s.mu.Unlock()
		in, out := pipeSize(t, p.stdin), pipeSize(t, p.stdout)
		if want == 0 {
			want = 64 << 10 // Linux's default
		}
		if in != want || out != want {
			t.Errorf("PipeBytes %d: stdin pipe %d bytes, stdout pipe %d, want %d", cfg.PipeBytes, in, out, want)
		}
	}
}
