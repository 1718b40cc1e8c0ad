package front

import (
	"bytes"
	"io"
	"net/http"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
)

// This file sends the retry of a stateless request parked for input on
// another replica to that replica. A request translated for a server of
// the session eras waits, answered input_required, on a connection of the
// replica that served it (eras.Parking): it is owner-bound, like a stdio
// session. Its requestState names the replica (Parking.Place), so the
// replica a retry lands on forwards it there (forward.go), one hop at
// most, as it forwards a session's requests to their owner.

// retryElsewhere forwards retry msg (the whole body of r) to the replica
// its request is parked on, and reports whether it answered r (forwarded,
// or refused a forged hop). It does not when the request is not another
// replica's, came forwarded already, or its replica is gone or cannot be
// reached: Unpark then answers here that the state is not valid (the
// request is gone with its replica, and the client starts it again).
func (h *Handler) retryElsewhere(w http.ResponseWriter, r *http.Request, msg *jsonrpc.Message) bool {
	cl := h.cfg.Cluster
	if cl == nil {
		return false
	}
	place := h.parking.Elsewhere(msg)
	if place == nil {
		return false
	}
	if hop := r.Header.Get(hopHeader); hop != "" {
		if _, err := h.cfg.Seal.Open(hopPurpose, hop); err != nil {
			writeError(w, http.StatusForbidden, protocol.CodeInvalidRequest, "mcpgate: "+hopHeader+" is not a replica's (forged, or sealed with a retired key)")
			return true
		}
		return false // at most one hop
	}
	instance, advertise, ok := parsePlace(place)
	if !ok || instance == cl.Instance() {
		return false
	}
	// The body was read to find the request: the owner gets it again.
	r.Body = io.NopCloser(bytes.NewReader(msg.Raw))
	r.ContentLength = int64(len(msg.Raw))
	return h.forwardToOwner(w, r, instance, advertise) // forward.go
}
