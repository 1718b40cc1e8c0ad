package main

import (
	"fmt"
	"sync"
	"time"

	"github.com/mcpgate/mcpgate/internal/procstat"
)

// procWindow measures, for `mcpgate bench --proc PID`, what process PID
// and its children cost over the load's measured window: CPU time
// (utime+stime from /proc) and context switches. Its window method is
// loadgen.Options.Window; result divides by the calls measured.
type procWindow struct {
	pid int

	mu            sync.Mutex // guards the rest: written by Run's goroutine, read after Run
	before, after procstat.Tree
	opened, done  bool
	err           error
}

func (p *procWindow) window(open bool) {
	t, err := procstat.ReadTree(p.pid)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		if p.err == nil {
			p.err = fmt.Errorf("--proc %d: %w", p.pid, err)
		}
		return
	}
	if open {
		p.before, p.opened = t, true
	} else {
		p.after, p.done = t, true
	}
}

// procJSON is what --proc adds to the --json output: per call measured,
// the process's CPU time (µs) and context switches, and its children's.
type procJSON struct {
	PID                     int     `json:"proc_pid"`
	CPUusPerCall            float64 `json:"proc_cpu_us_per_call"`
	SwitchesPerCall         float64 `json:"proc_switches_per_call"`
	Children                int     `json:"proc_children"`
	ChildrenCPUusPerCall    float64 `json:"proc_children_cpu_us_per_call"`
	ChildrenSwitchesPerCall float64 `json:"proc_children_switches_per_call"`
}

// result returns the window's costs per call, or an error if the process
// could not be read at both ends of the window or no call was measured.
func (p *procWindow) result(calls uint64) (procJSON, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.err != nil:
		return procJSON{}, p.err
	case !p.opened || !p.done:
		return procJSON{}, fmt.Errorf("--proc %d: the measured window did not run", p.pid)
	case calls == 0:
		return procJSON{}, fmt.Errorf("--proc %d: no call was measured", p.pid)
	}
	d := p.after.Sub(p.before)
	us := func(t time.Duration) float64 { return float64(t.Nanoseconds()) / 1e3 }
	n := float64(calls)
	return procJSON{
		PID:                     p.pid,
		CPUusPerCall:            us(d.Process.CPU) / n,
		SwitchesPerCall:         float64(d.Process.Switches) / n,
		Children:                d.Children,
		ChildrenCPUusPerCall:    us(d.ChildrenCPU) / n,
		ChildrenSwitchesPerCall: float64(d.ChildrenSwitches) / n,
	}, nil
}
