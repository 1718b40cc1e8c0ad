package testkit

import "testing"

// TestRedisStopStart: the server answers PING once started, not after
// Stop, and again on the same address after Start; the process is gone
// after Stop.
func TestRedisStopStart(t *testing.T) {
	r := StartRedis(t)
	if err := RedisPing(r.Addr); err != nil {
		t.Fatalf("PING after start: %v", err)
	}
	pid := r.PID()
	if pid == 0 {
		t.Fatal("no PID for a running server")
	}
	r.Stop()
	if err := RedisPing(r.Addr); err == nil {
		t.Fatal("PING answered after Stop")
	}
	if r.PID() != 0 {
		t.Error("a stopped server reports a PID")
	}
	r.Start()
	if err := RedisPing(r.Addr); err != nil {
		t.Fatalf("PING after restart: %v", err)
	}
	if r.PID() == pid {
		t.Errorf("restart kept PID %d", pid)
	}
}
