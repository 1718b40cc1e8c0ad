// Package procstat reads what Linux's /proc says a process and its
// children have cost: CPU time (utime and stime) and context switches. It
// is what `mcpgate bench --proc PID` measures a gateway or a server with,
// over the load's measured window; CPU time per call is robust to a busy
// machine where calls per second are not.
//
// It only reads files; it keeps no state and is safe for concurrent use.
// Elsewhere than Linux every read fails.
package procstat

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// userHZ is the unit of /proc's CPU times: USER_HZ, which Linux fixes at
// 100 for every architecture in what it shows user space.
const userHZ = 100

// tick is one USER_HZ clock tick.
const tick = time.Second / userHZ

// Times are the CPU times of one /proc/PID/stat.
type Times struct {
	User, System time.Duration // utime, stime: the process's threads, live and exited
	// ChildUser and ChildSystem are cutime and cstime: the children that
	// have exited and been waited for (with their own waited-for children).
	ChildUser, ChildSystem time.Duration
}

// ParseStat reads the CPU times from the contents of /proc/PID/stat. The
// command name (the second field) is in parentheses and may hold spaces
// and parentheses itself, so the fields are counted from its last ")".
func ParseStat(b []byte) (Times, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Times{}, errors.New("procstat: stat has no command name in parentheses")
	}
	// After ")": state (field 3) onward; utime..cstime are fields 14..17.
	fields := bytes.Fields(b[i+1:])
	const first = 14 - 3
	if len(fields) < first+4 {
		return Times{}, fmt.Errorf("procstat: stat has %d fields after the command name, want at least %d", len(fields), first+4)
	}
	var v [4]time.Duration
	for k := range v {
		n, err := strconv.ParseUint(string(fields[first+k]), 10, 63)
		if err != nil || n > uint64(1<<62)/uint64(tick) {
			return Times{}, fmt.Errorf("procstat: stat field %d is %q, not a tick count", 14+k, fields[first+k])
		}
		v[k] = time.Duration(n) * tick
	}
	return Times{User: v[0], System: v[1], ChildUser: v[2], ChildSystem: v[3]}, nil
}

// ParseSwitches returns voluntary_ctxt_switches + nonvoluntary_ctxt_switches
// from the contents of a /proc/PID/status or /proc/PID/task/TID/status,
// which are one thread's.
func ParseSwitches(b []byte) (uint64, error) {
	var sum uint64
	found := 0
	for line := range bytes.Lines(b) {
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok || (string(name) != "voluntary_ctxt_switches" && string(name) != "nonvoluntary_ctxt_switches") {
			continue
		}
		n, err := strconv.ParseUint(string(bytes.TrimSpace(value)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("procstat: status %s is %q, not a count", name, bytes.TrimSpace(value))
		}
		if sum+n < sum {
			return 0, errors.New("procstat: status switch counts overflow")
		}
		sum += n
		found++
	}
	if found != 2 {
		return 0, errors.New("procstat: status lacks voluntary_ctxt_switches or nonvoluntary_ctxt_switches")
	}
	return sum, nil
}

// ParseChildren returns the pids in the contents of a
// /proc/PID/task/TID/children file (space separated).
func ParseChildren(b []byte) ([]int, error) {
	var pids []int
	for _, f := range bytes.Fields(b) {
		n, err := strconv.Atoi(string(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("procstat: children holds %q, not a pid", f)
		}
		pids = append(pids, n)
	}
	return pids, nil
}

// Process is one process's cost so far.
type Process struct {
	CPU time.Duration // utime+stime of all its threads
	// ReapedCPU is cutime+cstime: its children that exited and were
	// waited for.
	ReapedCPU time.Duration
	// Switches sums voluntary and involuntary context switches over its
	// live threads (a thread that exited takes its count with it; Go
	// rarely ends threads).
	Switches uint64
}

// Read returns the cost so far of process pid.
func Read(pid int) (Process, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	b, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return Process{}, err
	}
	t, err := ParseStat(b)
	if err != nil {
		return Process{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	p := Process{CPU: t.User + t.System, ReapedCPU: t.ChildUser + t.ChildSystem}
	tasks, err := filepath.Glob(filepath.Join(dir, "task", "*", "status"))
	if err != nil {
		return Process{}, err
	}
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended since the glob
		}
		n, err := ParseSwitches(b)
		if err != nil {
			return Process{}, fmt.Errorf("%s: %w", f, err)
		}
		p.Switches += n
	}
	return p, nil
}

// Children returns the pids of pid's live child processes.
func Children(pid int) ([]int, error) {
	files, err := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "children"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("procstat: no /proc task files for pid %d (not running, or not Linux)", pid)
	}
	var pids []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		c, err := ParseChildren(b)
		if err != nil {
			return nil, err
		}
		pids = append(pids, c...)
	}
	return pids, nil
}

// Tree is a process's cost and its children's, at one moment.
type Tree struct {
	Process Process
	// ChildrenCPU is the CPU time of its live children plus that of the
	// children it has waited for (cutime+cstime), so that the difference
	// of two Trees counts a child that ended in between exactly once.
	ChildrenCPU time.Duration
	// ChildrenSwitches sums the context switches of its live children
	// only (those of an ended child are lost with it).
	ChildrenSwitches uint64
	Children         int // live children
}

// ReadTree returns the cost so far of pid and of its children (one level:
// a child's own children count only once waited for).
func ReadTree(pid int) (Tree, error) {
	p, err := Read(pid)
	if err != nil {
		return Tree{}, err
	}
	t := Tree{Process: p, ChildrenCPU: p.ReapedCPU}
	kids, err := Children(pid)
	if err != nil {
		return Tree{}, err
	}
	for _, c := range kids {
		cp, err := Read(c)
		if err != nil {
			continue // it ended since the list was read
		}
		t.ChildrenCPU += cp.CPU
		t.ChildrenSwitches += cp.Switches
		t.Children++
	}
	return t, nil
}

// Sub returns what t cost since before: CPU and switches of the process
// and of its children. A count that went down (switches of a child that
// ended) is 0.
func (t Tree) Sub(before Tree) Tree {
	sub := func(a, b uint64) uint64 {
		if a < b {
			return 0
		}
		return a - b
	}
	return Tree{
		Process: Process{
			CPU:       t.Process.CPU - before.Process.CPU,
			ReapedCPU: t.Process.ReapedCPU - before.Process.ReapedCPU,
			Switches:  sub(t.Process.Switches, before.Process.Switches),
		},
		ChildrenCPU:      t.ChildrenCPU - before.ChildrenCPU,
		ChildrenSwitches: sub(t.ChildrenSwitches, before.ChildrenSwitches),
		Children:         t.Children,
	}
}
