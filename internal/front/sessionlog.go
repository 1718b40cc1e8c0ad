package front

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/mcpgate/mcpgate/internal/session"
)

// This file logs the life of client sessions at info: one line when a
// session is established (a Streamable HTTP session whose initialize
// succeeded, a legacy SSE session whose stream opened) and one when it
// ends, with why, its age and the requests it took (initialize included). A stateless
// (2026-07-28) request is a session of its own inside the gateway, but it
// is never established and never logged: one line per request would flood
// the log (the audit log is for requests).
//
//	level=INFO msg="session opened" session=Xy3_kq8Z server=memory transport=streamable version=2025-11-25 principal=key:ci
//	level=INFO msg="session closed" session=Xy3_kq8Z server=memory reason="the client deleted the session" age=1m2.5s requests=12 principal=key:ci

// Transports of established sessions, as logged.
const (
	transportStreamable = "streamable" // Streamable HTTP
	transportSSE        = "sse"        // the 2024-11-05 HTTP+SSE transport
)

// established marks s established and logs its opening. version is the
// negotiated protocol version, "" when not yet known (a legacy session
// initializes after its stream opened).
func (h *Handler) established(s *session.Session, target, transport, version string) {
	s.Establish(time.Now())
	attrs := make([]slog.Attr, 0, 5)
	attrs = append(attrs, slog.String("session", logID(s.ID)), logTarget(target), slog.String("transport", transport))
	if version != "" {
		attrs = append(attrs, slog.String("version", version))
	}
	attrs = appendPrincipal(attrs, s.Owner)
	h.log.LogAttrs(context.Background(), slog.LevelInfo, "session opened", attrs...)
}

// logEnded logs the end of s, if it was established (once: end may be
// called twice).
func (h *Handler) logEnded(s *session.Session, reason string) {
	at, ok := s.TakeEstablished()
	if !ok {
		return
	}
	attrs := make([]slog.Attr, 0, 6)
	attrs = append(attrs, slog.String("session", logID(s.ID)), logTarget(s.Server), slog.String("reason", reason),
		slog.Duration("age", time.Since(at).Round(time.Millisecond)), slog.Uint64("requests", s.Requests()))
	attrs = appendPrincipal(attrs, s.Owner)
	h.log.LogAttrs(context.Background(), slog.LevelInfo, "session closed", attrs...)
}

// appendPrincipal adds the principal of owner key owner (see admission.PrincipalKey) as
// KIND:NAME, as the audit log writes it; nothing when there is none.
func appendPrincipal(attrs []slog.Attr, owner string) []slog.Attr {
	if owner == "" {
		return attrs
	}
	return append(attrs, slog.String("principal", strings.Replace(owner, "\x00", ":", 1)))
}
