// Package session owns client sessions of the HTTP front: their random ids,
// idle expiry, and the per-stream event logs that make SSE streams resumable
// with Last-Event-ID.
//
// A Session is created by the HTTP front when a client initializes and lives
// in a Store until the client deletes it, it expires, or the gateway stops.
// Messages for a client are appended to a Stream (one per POST that carries
// requests, plus the session's standalone GET stream); whoever serves that
// stream over HTTP reads them back with Stream.Next. Appending never blocks
// and never does I/O, so the multiplexer may deliver from any goroutine.
//
// Locking: Store.mu guards the session table; Session.mu guards a session's
// stream table and activity counters; Stream.mu guards one event log. No lock
// is held while calling out of the package.
package session
