//go:build !linux

package echoserver

import "time"

// burnCPU keeps the calling goroutine busy for d of wall time (elsewhere
// than Linux the thread's CPU clock is not read).
func burnCPU(d time.Duration) { burnWall(d) }
