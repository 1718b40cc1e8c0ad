package stdio

import (
	"sync"
	"syscall"
)

// live is every process generation started by any Stdio of this gateway and
// not reaped yet: what KillAll must reach when the gateway is about to die
// without stopping its servers.
var live struct {
	mu    sync.Mutex
	procs map[*proc]struct{} // guarded by mu
}

// register adds p to the live set; called by startProc once p runs.
func register(p *proc) {
	live.mu.Lock()
	if live.procs == nil {
		live.procs = make(map[*proc]struct{})
	}
	live.procs[p] = struct{}{}
	live.mu.Unlock()
}

// unregister removes p from the live set; called once its leader is reaped
// (its process group id may then be reused by someone else).
func unregister(p *proc) {
	live.mu.Lock()
	delete(live.procs, p)
	live.mu.Unlock()
}

// KillAll sends SIGKILL to the process group of every server process that
// any Stdio started and has not reaped yet, and returns how many groups it
// signalled. It is for a gateway about to exit at once (a second SIGINT or
// SIGTERM during the drain): Pdeathsig kills only the direct children when
// the gateway dies, not the grandchildren in their groups (npx -> sh ->
// node), so the whole groups must be killed before exiting.
//
// KillAll never blocks on a child and waits for nothing: the Stdios notice
// the exits as usual (Handler.Exited, and a restart if the Stdio is not
// closed). Safe for concurrent use, including with Stdio.Close.
func KillAll() int {
	live.mu.Lock()
	procs := make([]*proc, 0, len(live.procs))
	for p := range live.procs {
		procs = append(procs, p)
	}
	live.mu.Unlock()
	// A process reaped since the snapshot is skipped by signal, under its
	// sigMu, so a recycled group id is never signalled.
	for _, p := range procs {
		p.signal(syscall.SIGKILL)
	}
	return len(procs)
}
