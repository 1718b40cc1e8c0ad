// Package admission is what a request to a target (a server or an
// endpoint, on any URL of either era) passes before the HTTP front's
// transport serves it: the Host and Origin checks, authentication (the
// principal into the request's context), the per-principal limits and the
// audit record, as http.Handler middleware (Stage) composed by Chain in
// the one order the front wires (front/admission.go).
//
// Each stage answers the request itself when it refuses, and otherwise
// calls the next. What the stages after the front's routing need travels
// in one *Request in the request's context (From): the target the front
// resolved, and the Limiter and principal key the transport asks once it
// has read a POST's messages. The audit stage wraps the ResponseWriter in
// an audit.Exchange, to which the transport tells what only it knows (the
// messages, a limit's refusal).
//
// It imports auth, conn, audit and limits, never the front. Its stages
// hold no locks of their own; a Request belongs to its request's
// goroutine.
package admission
