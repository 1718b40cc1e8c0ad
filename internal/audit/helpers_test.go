package audit

import (
	"sync"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// The helpers of this package's tests: the audit log's lines as a test
// reads them, a log sink safe for concurrent writers, a clock the test
// moves, and waits bounded by a generous deadline.

// auditEntry and parseAudit read the audit log's lines (testkit).
type auditEntry = testkit.AuditLine

func parseAudit(t *testing.T, s string) []auditEntry { return testkit.ParseAuditLines(t, s) }

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
