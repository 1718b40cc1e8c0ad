package stdio

import (
	"strings"
	"sync"
)

// recentStderrLines is how many stderr lines a Stdio keeps for its
// owner's status reports (RecentStderr), over all its processes; each is
// cut to stderrTailBytes.
const recentStderrLines = 20

// recent keeps what a status report shows of a Stdio beyond its counters:
// its last stderr lines, whatever process wrote them, and the last exit
// the gateway did not ask for. The stderr logger and the reader write it;
// any goroutine reads it.
type recent struct {
	mu sync.Mutex
	// guarded by mu:
	lines    [recentStderrLines]string
	next, n  int
	lastExit string // ExitError.Error() of the last unrequested exit; "" none
}

func (r *recent) addLine(line []byte) {
	line = line[:min(len(line), stderrTailBytes)]
	s := strings.ToValidUTF8(string(line), "\uFFFD")
	r.mu.Lock()
	r.lines[r.next] = s
	r.next = (r.next + 1) % recentStderrLines
	r.n = min(r.n+1, recentStderrLines)
	r.mu.Unlock()
}

func (r *recent) exited(err error) {
	if err == nil {
		return
	}
	r.mu.Lock()
	r.lastExit = err.Error()
	r.mu.Unlock()
}

// RecentStderr returns the last stderr lines (at most 20, each cut to 200
// bytes) of the Stdio's processes, oldest first. They are the server's
// words: untrusted text. Safe for concurrent use.
func (s *Stdio) RecentStderr() []string {
	r := &s.recent
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, r.n)
	for i := range r.n {
		out = append(out, r.lines[(r.next-r.n+i+recentStderrLines)%recentStderrLines])
	}
	return out
}

// LastExit returns the message of the last exit of a process that the
// Stdio's Close did not ask for (status, uptime, why the gateway killed it,
// stderr tail), or "" if none. Safe for concurrent use.
func (s *Stdio) LastExit() string {
	s.recent.mu.Lock()
	defer s.recent.mu.Unlock()
	return s.recent.lastExit
}
