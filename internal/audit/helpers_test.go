package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"
)

// The helpers of this package's tests: the audit log's lines as a test
// reads them, a log sink safe for concurrent writers, a clock the test
// moves, and waits bounded by a generous deadline.

type auditEntry struct {
	Time       string          `json:"time"`
	Principal  string          `json:"principal"`
	Kind       string          `json:"kind"`
	Target     string          `json:"target"`
	Method     string          `json:"method"`
	Name       string          `json:"name"`
	ID         json.RawMessage `json:"id"`
	DurationMs *float64        `json:"durationMs"`
	Status     int             `json:"status"`
	Outcome    string          `json:"outcome"`
	Code       int             `json:"code"`
	BytesIn    int             `json:"bytesIn"`
	BytesOut   int64           `json:"bytesOut"`
	Arguments  json.RawMessage `json:"arguments"`
	Dropped    int64           `json:"dropped"`
	HTTP       string          `json:"http"`
}

func parseAudit(t *testing.T, s string) []auditEntry {
	t.Helper()
	var out []auditEntry
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		var e auditEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

// syncBuffer is a bytes.Buffer safe for concurrent writers (a log sink).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock { return &testClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func waitFor[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

// waitForCond polls cond (generously) until it holds.
func waitForCond(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
