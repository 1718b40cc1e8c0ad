// Package cluster owns what the replicas of one gateway share through
// Redis, which is only what cannot be sealed into a session id: the
// heartbeats and the view of live replicas (live.go), the newest handoff
// state of portable sessions, versioned, and session revocations
// (session.go), what every replica hears of both (pubsub.go), the
// resumable event streams of portable sessions (streams.go), and the
// Redis side of the cluster-wide limits (limits.go, implementing
// limits.Shared: GCRA rates and in-flight slots in one script, session
// counts).
//
// The gateway builds one Cluster from the configuration's gateway.cluster
// (New), runs it (Run) for the process's life and closes it after Run
// returns. The front asks Alive and Instance when a request names a
// session another replica owns, State/SetState/Revoked/Revoke for portable
// sessions, OpenStream/AppendEvent when a portable session's reply becomes
// a resumable stream and Events when a client resumes a stream another
// replica wrote, and registers OnRevoke, OnStateChange and OnSubscribed;
// the limiter calls Admit,
// AdmitSession and Release. Without a Redis URL a Cluster knows only itself: Live is 1,
// Alive is true for itself and unknown for others, and every Redis call
// fails at once with ErrUnavailable.
//
// Redis is never allowed to stall a caller: every call is bounded by
// Config.Timeout (dial, read, write and pool wait alike, no retries), and
// after one failure Redis counts as down: calls fail at once until a
// heartbeat reaches it again. One log line says it went down and one that
// it is back. Releases go through a bounded queue (dropped past it, and
// counted) so no reply waits on Redis, and so do the writes of resumable
// streams.
//
// Locking: mu guards the live view and the pub/sub callbacks and is never
// held during I/O; Redis's health is one atomic. Run owns three goroutines
// (the subscriber of revocations and state changes, the release sender
// and the stream writer)
// and waits for them before it returns.
package cluster
