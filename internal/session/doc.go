// Package session owns client sessions of the HTTP front: their random ids,
// idle expiry, and the per-stream event logs that make SSE streams resumable
// with Last-Event-ID.
//
// A Session is created by the HTTP front when a client initializes and lives
// in a Directory (directory.go; Store, in memory, is the one there is)
// until the client deletes it, it expires, or the gateway stops. The front
// creates, looks up and deletes sessions only through the Directory.
// Messages for a client are appended to a Stream (one per POST that carries
// requests, plus the session's standalone GET stream); whoever serves that
// stream over HTTP reads them back with Stream.Next. Appending never blocks
// and never does I/O, so the multiplexer may deliver from any goroutine.
//
// A POST stream lives in its session until it is let go: Forget drops it at
// once (its client cannot resume it); Finish keeps it resumable for the
// ResumeGrace (default 10 s) after its last event was written, since that
// write may be lost with a connection breaking right then. Streams whose
// grace ended are dropped by the session's next NewStream or by Prune (the
// HTTP front's idle sweep), with no timer of their own. Until then the
// session's bounds (64 retained streams, SessionReplayBytes) may evict
// finished streams, oldest first.
//
// When several replicas serve a session (replicas.go), each numbers its
// streams from a base of its own (NumberStreamsFrom), a stream's events
// can be mirrored as they are appended into the store the replicas share
// (Stream.Mirror), and Record is what another replica reads back from it.
//
// Locking: Store.mu guards the session table; Session.mu guards a session's
// stream table and activity counters; Stream.mu guards one event log. Lock
// order: Session.mu before Stream.mu (a stream over its session's byte bound
// releases its own lock before asking the session to evict). No lock is held
// while calling out of the package, but for a stream's mirror, which is
// called with Stream.mu held (so that it sees the events in order) and must
// neither block nor call the stream.
//
// Ending a session: take it out of the Directory, close its connection (which
// answers the requests in flight on their streams), then Session.Close.
package session
