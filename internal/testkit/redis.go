package testkit

import (
	"bufio"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RedisServer is a real redis-server a test started with [StartRedis]: no
// persistence, on a loopback port of its own. Stop and Start let a chaos
// test take it away and bring it back on the same address.
type RedisServer struct {
	// Addr is host:port, the same across Stop and Start.
	Addr string

	t    testing.TB
	bin  string
	port string
	dir  string
	log  SyncBuffer

	mu     sync.Mutex // guards cmd and exited
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
}

// Redis starts a redis-server for t (see [StartRedis]) and returns its
// address.
func Redis(t testing.TB) (addr string) {
	t.Helper()
	return StartRedis(t).Addr
}

// StartRedis starts redis-server on a free loopback port with
// `--save "" --appendonly no`, waits until it answers PING, and stops it at
// cleanup. The binary is redis-server on PATH, else the one scripts/redis.sh
// unpacked under the module root's .cache/redis. Without one the test
// skips, or fails when CI is set: a CI run that skips the cluster tests
// proves nothing.
func StartRedis(t testing.TB) *RedisServer {
	t.Helper()
	bin := redisBinary()
	if bin == "" {
		msg := "redis-server is not on PATH nor under .cache/redis: run scripts/redis.sh (make peers)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	addr := FreeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	r := &RedisServer{Addr: addr, t: t, bin: bin, port: port, dir: t.TempDir()}
	t.Cleanup(r.Stop)
	r.Start()
	return r
}

// redisBinary finds redis-server on PATH or under .cache/redis of the
// module root (the directory above the working directory holding go.mod).
func redisBinary() string {
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, ".cache", "redis", "bin", "redis-server")
			if st, err := os.Stat(p); err == nil && st.Mode()&0o111 != 0 {
				return p
			}
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// Start starts the server (again, after Stop) on Addr and waits until it
// answers PING. It fails the test if the server is running or exits first.
func (r *RedisServer) Start() {
	r.t.Helper()
	r.mu.Lock()
	if r.cmd != nil {
		r.mu.Unlock()
		r.t.Fatalf("redis-server on %s is already running", r.Addr)
	}
	cmd := exec.Command(r.bin,
		"--bind", "127.0.0.1", "--port", r.port,
		"--save", "", "--appendonly", "no",
		"--dir", r.dir, "--daemonize", "no", "--loglevel", "warning")
	cmd.Stdout = &r.log
	cmd.Stderr = &r.log
	// A test binary killed by its timeout runs no cleanup: the kernel
	// stops the server with it. (Go threads never exit while unlocked, so
	// the parent-death signal is not sent early.)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		r.mu.Unlock()
		r.t.Fatalf("starting %s: %v", r.bin, err)
	}
	exited := make(chan struct{})
	var werr error
	go func() {
		werr = cmd.Wait()
		close(exited)
	}()
	r.cmd, r.exited = cmd, exited
	r.mu.Unlock()

	WaitFor(r.t, "redis-server to answer PING on "+r.Addr, func() bool {
		select {
		case <-exited:
			r.t.Fatalf("redis-server exited before answering PING: %v\n%s", werr, r.log.String())
		default:
		}
		return RedisPing(r.Addr) == nil
	})
}

// Stop kills the server (SIGKILL, by its PID: a crash, not a shutdown) and
// waits until it is gone; the port is free for Start again. Stopping a
// stopped server does nothing.
func (r *RedisServer) Stop() {
	r.mu.Lock()
	cmd, exited := r.cmd, r.exited
	r.cmd, r.exited = nil, nil
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
	<-exited
}

// PID is the running server's process id; 0 when stopped.
func (r *RedisServer) PID() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return 0
	}
	return r.cmd.Process.Pid
}

// RedisPing sends PING to the Redis at addr over a new connection and
// returns nil when it answers +PONG.
func RedisPing(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return errors.New("PING answered " + strings.TrimSpace(line))
	}
	return nil
}
