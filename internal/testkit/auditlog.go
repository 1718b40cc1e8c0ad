package testkit

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
)

// AuditLine is one line of the audit log as a test reads it: the fields
// the log writes, decoded independently of the writer's own type so that
// a renamed field fails the tests that read it.
type AuditLine struct {
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

// ParseAuditLines decodes an audit log's lines, failing t on one that is
// not a JSON object of those fields.
func ParseAuditLines(t testing.TB, s string) []AuditLine {
	t.Helper()
	var out []AuditLine
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		var e AuditLine
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("audit line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}
