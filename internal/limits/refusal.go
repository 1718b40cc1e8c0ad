package limits

import (
	"strconv"
	"time"
)

// Outcomes of refused requests, as the audit log and the metrics tell them.
const (
	OutcomeRateLimited = "rate_limited" // a per-principal limit: 429
	OutcomeOverloaded  = "overloaded"   // the global cap: 503
)

// Refusal is why a request is refused: its message (without the
// "mcpgate: " prefix the front adds), its Retry-After, the HTTP status
// (0: 429) and the audit log's outcome ("": rate_limited).
type Refusal struct {
	Msg     string
	Retry   time.Duration
	Status  int
	Outcome string
}

// HTTPStatus is the status of a response refused by ref.
func (ref *Refusal) HTTPStatus() int {
	if ref.Status == 0 {
		return 429 // http.StatusTooManyRequests; limits knows no HTTP
	}
	return ref.Status
}

// AuditOutcome is the outcome of a request refused by ref.
func (ref *Refusal) AuditOutcome() string {
	if ref.Outcome == "" {
		return OutcomeRateLimited
	}
	return ref.Outcome
}

// RetryAfter formats d as Retry-After seconds: rounded up, at least 1.
func RetryAfter(d time.Duration) string {
	secs := int64((d + time.Second - 1) / time.Second)
	return strconv.FormatInt(max(secs, 1), 10)
}
