package testkit

import (
	"bytes"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Proc is a process found by [FindProcs].
type Proc struct {
	PID int
	// State is the one-letter state from /proc/<pid>/stat: R, S, D, T, ...
	// A process reported as Z (zombie) has exited and waits to be reaped.
	State string
}

// FindProcs returns the processes whose command line contains marker, sorted
// by PID. It scans /proc, so it sees processes of the whole PID namespace.
//
// A zombie's command line is empty on Linux, so a process that has already
// exited is normally not found even before it is reaped; State tells the rest.
// Safe for concurrent use, like Procs and WaitProcsGone.
func FindProcs(marker string) []Proc {
	if marker == "" {
		return nil
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []Proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(cmdline, []byte(marker)) {
			continue
		}
		out = append(out, Proc{PID: pid, State: procState(e.Name())})
	}
	slices.SortFunc(out, func(a, b Proc) int { return a.PID - b.PID })
	return out
}

// Procs returns the PIDs of [FindProcs] (zombies included, if any is seen).
func Procs(marker string) []int {
	var pids []int
	for _, p := range FindProcs(marker) {
		pids = append(pids, p.PID)
	}
	return pids
}

// WaitProcsGone polls [FindProcs] until no live (non-zombie) process matches
// marker, or timeout passes; it returns what is still alive. The timeout is a
// failure bound for tests, not a delay: it returns as soon as all are gone.
func WaitProcsGone(marker string, timeout time.Duration) []Proc {
	deadline := time.Now().Add(timeout)
	for {
		var live []Proc
		for _, p := range FindProcs(marker) {
			if p.State != "Z" {
				live = append(live, p)
			}
		}
		if len(live) == 0 || time.Now().After(deadline) {
			return live
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// procState reads the state field of /proc/<pid>/stat, which follows the
// parenthesized command name (which may itself contain ") ").
func procState(pid string) string {
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return "?"
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return "?"
	}
	return s[i+2 : i+3]
}
