// Package audit owns the audit log: its record (one JSON line per client
// request to a target, with the principal, the target, the method, the
// outcome, sizes and duration), the bounded queue and the one writer
// goroutine that write it (writer.go), and the Observer that gets the
// same records for metrics (observe.go).
//
// The HTTP front knows the outcomes only it sees and tells them through a
// small interface: the admission chain (internal/admission) wraps an
// audited POST's ResponseWriter in an Exchange (Begin), to which the
// front tells the messages it read (SetMessages), a limit's refusal
// (Refused) and lines written elsewhere (Skip); the Exchange reads the
// replies' outcomes from the bytes written, and writes the lines at
// Finish. A legacy /messages request's line is written when its reply
// reaches the session's stream (Accepted, Replied, RefusedOnStream), and
// one refused by authentication at once (AuthRefused). The gateway
// (internal/gateway) opens the Auditor and closes it after the front.
//
// Locking: an Auditor is safe for concurrent use: lines go through a
// channel to the writer goroutine, its counters are atomic, and nothing
// on a request's path blocks on the disk (a full queue drops and counts).
// An Exchange belongs to its POST's goroutine. The Observer is called on
// the goroutine that finishes a request and must not block.
package audit
