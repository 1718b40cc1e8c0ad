package echoserver

import (
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// clockThreadCPUTime is Linux's CLOCK_THREAD_CPUTIME_ID.
const clockThreadCPUTime = 3

// burnCPU keeps the calling thread busy until it has used d of CPU time:
// time the scheduler gives another process does not count, so the work a
// call costs is the same on a busy machine as on a quiet one.
func burnCPU(d time.Duration) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start, ok := threadCPU()
	if !ok {
		burnWall(d)
		return
	}
	x := uint64(start) | 1
	for {
		for range 256 { // about a microsecond of work between clock reads
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
		}
		now, _ := threadCPU()
		if now-start >= d {
			break
		}
	}
	sink.Store(x)
}

// threadCPU returns the calling thread's CPU time.
func threadCPU() (time.Duration, bool) {
	var ts syscall.Timespec
	_, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0)
	if errno != 0 {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
