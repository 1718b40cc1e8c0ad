// Package limits owns the gateway's admission limits: the per-principal
// limits (a request rate, requests in flight, sessions, a rate per
// principal and tool), the gateway-wide cap on requests in flight
// (overload.go), and the one-line-per-interval limit on repeated log lines
// (loglimit.go).
//
// It knows no HTTP: a Limiter says whether a POST's messages or a new
// session may go on and, when not, why (a Refusal); the HTTP front writes
// the refusal (429, or 503 for the global cap) and the audit log records
// its outcome. internal/admission hands the front the Limiter and the key
// of the request's principal; the front asks once it has read a POST's
// messages (AdmitRequest) and when it opens a session (AdmitSession).
//
// With Config.Shared set (internal/cluster's Redis store, through the
// Shared interface of shared.go, so this package does not know Redis), a
// principal's rates, in-flight requests and sessions are counted for the
// whole cluster: one round trip per POST that has such a limit, none for
// one that has not. While the store fails, each replica falls back to its
// own buckets with every limit divided by Shared.Live(). The gateway calls
// Sweep now and then to give back sessions that ended.
//
// Locking: a Limiter is safe for concurrent use. Its per-principal state is
// guarded by one mutex, taken only when a per-principal limit of POSTs is
// set (and, with a Shared store, only while the store fails); never held
// during a call to the store. The global cap is one atomic counter. A
// LogLimit has its own mutex.
package limits
