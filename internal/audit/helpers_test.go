package audit

import (
	"bufio"
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
