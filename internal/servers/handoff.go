package servers

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcpgate/mcpgate/internal/eras"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/upstream/remote"
)

// This file is the handoff state of a portable session: what another
// replica needs to serve a session of a remote server (portable.go). The
// front keeps it opaque, sealed into the session id or in a shared store,
// so it is small and binary:
//
//	byte 0   layout version (handoffV1, handoffV2)
//	byte 1   kind: 'u' an upstream Streamable HTTP session of its own,
//	         'r' a session of the reverse bridge (gateway state only)
//	then four fields, each a uvarint length and its bytes:
//	  session       'u': the remote's Mcp-Session-Id ("" for a remote
//	                without sessions); 'r': always ""
//	  version       'u': the protocol version the remote agreed to;
//	                'r': the one negotiated with the client; "" before
//	                the session initialized (then every field is "")
//	  capabilities  the client's capabilities object, or ""
//	  clientInfo    the client's clientInfo object, or ""
//	layout 2 ('r' only) adds two more:
//	  level         the level of the client's last logging/setLevel, a
//	                JSON string as it sent it, or ""
//	  subscriptions the URIs it subscribed to, in increasing order, each
//	                a uvarint length and its bytes
//
// 'u' keeps the client's capabilities and clientInfo to renew the upstream
// session if the remote forgets it (the initialize replayed is built from
// them); 'r' to put them in the _meta of every request, with the level,
// and the subscriptions for the listen the session holds. A state with no
// level and no subscriptions is encoded in layout 1, which the replicas
// of the version before layout 2 read too (a rolling upgrade).

const (
	handoffV1 = 1
	handoffV2 = 2
	// maxHandoffBytes bounds a state: what the decoder accepts, and so what
	// the encoder makes (capabilities and clientInfo that would not fit
	// are left out).
	maxHandoffBytes = 8 << 10
	// maxVersionBytes bounds a protocol version ("2025-11-25").
	maxVersionBytes = 32
	// maxLevelBytes bounds a logging level (`"emergency"`, quoted).
	maxLevelBytes = 32
)

// Kinds of handoff state.
const (
	kindUpstream byte = 'u'
	kindReverse  byte = 'r'
)

// handoffState is a decoded handoff state.
type handoffState struct {
	kind    byte
	session string
	version string
	caps    json.RawMessage
	info    json.RawMessage
	level   json.RawMessage // 'r': a JSON string, or nil
	subs    []string        // 'r': increasing, or nil
}

// upstreamState is the state of remote session s: its id and version, and
// the capabilities and clientInfo of the initialize that renews it.
func upstreamState(s remote.Session) handoffState {
	var p struct {
		Capabilities json.RawMessage `json:"capabilities"`
		ClientInfo   json.RawMessage `json:"clientInfo"`
	}
	_ = json.Unmarshal(s.Init, &p) // a failure leaves them empty: no renewal
	return handoffState{kind: kindUpstream, session: s.ID, version: s.Version, caps: p.Capabilities, info: p.ClientInfo}
}

// reverseState is the state of a reverse-bridge session.
func reverseState(s eras.ReverseSession) handoffState {
	return handoffState{kind: kindReverse, version: s.Version, caps: s.Capabilities, info: s.ClientInfo, level: s.Level, subs: s.Subscriptions}
}

// encode returns the state's bytes. What would make the state longer than
// maxHandoffBytes is left out, rather than having no state at all: first
// the subscriptions (a resumed session then gets no resources/updated
// until its client subscribes again; the replica that took them keeps
// them), then the capabilities and clientInfo (it cannot renew its
// upstream session, or declares no capabilities). Capabilities and
// clientInfo that are not JSON objects, a level that is not a short JSON
// string, and subscriptions not in increasing order are left out too.
func (h handoffState) encode() []byte {
	if !jsonObject(h.caps) || !jsonObject(h.info) {
		h.caps, h.info = nil, nil
	}
	if len(h.level) == 0 || !levelValid(h.level) {
		h.level = nil
	}
	if len(h.subs) == 0 || !increasing(h.subs) {
		h.subs = nil
	}
	size := 2 + 6*binary.MaxVarintLen64 + len(h.session) + len(h.version) + len(h.level)
	subsSize := 0
	for _, uri := range h.subs {
		subsSize += binary.MaxVarintLen64 + len(uri)
	}
	if size+len(h.caps)+len(h.info)+subsSize > maxHandoffBytes {
		h.subs, subsSize = nil, 0
	}
	if size+len(h.caps)+len(h.info) > maxHandoffBytes {
		h.caps, h.info = nil, nil
	}
	layout := byte(handoffV1)
	if h.level != nil || h.subs != nil {
		layout = handoffV2
	}
	b := make([]byte, 0, size+len(h.caps)+len(h.info)+subsSize)
	b = append(b, layout, h.kind)
	fields := [][]byte{[]byte(h.session), []byte(h.version), h.caps, h.info}
	if layout == handoffV2 {
		var subs []byte
		for _, uri := range h.subs {
			subs = binary.AppendUvarint(subs, uint64(len(uri)))
			subs = append(subs, uri...)
		}
		fields = append(fields, h.level, subs)
	}
	for _, f := range fields {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b
}

// levelValid reports whether level is empty or a JSON string of at most
// maxLevelBytes.
func levelValid(level []byte) bool {
	return len(level) == 0 || len(level) <= maxLevelBytes && level[0] == '"' && json.Valid(level)
}

// increasing reports whether every value of s is greater than the one
// before it: sorted, without repeats (one encoding per set).
func increasing(s []string) bool {
	for i := 1; i < len(s); i++ {
		if s[i] <= s[i-1] {
			return false
		}
	}
	return true
}

// jsonObject reports whether v is empty or a JSON object.
func jsonObject(v []byte) bool {
	return len(v) == 0 || v[0] == '{' && json.Valid(v)
}

// errBadState wraps every reason a state does not decode.
var errBadState = errors.New("the session's handoff state does not parse")

// decodeHandoff decodes a state made by encode, checking everything that
// goes on into headers, _meta or an initialize.
func decodeHandoff(b []byte) (handoffState, error) {
	bad := func(format string, args ...any) (handoffState, error) {
		return handoffState{}, fmt.Errorf("%w: "+format, append([]any{errBadState}, args...)...)
	}
	if len(b) > maxHandoffBytes {
		return bad("%d bytes, over %d", len(b), maxHandoffBytes)
	}
	if len(b) < 2 {
		return bad("%d bytes", len(b))
	}
	n := 0
	switch b[0] {
	case handoffV1:
		n = 4
	case handoffV2:
		n = 6
	default:
		return bad("layout %d, want %d or %d", b[0], handoffV1, handoffV2)
	}
	h := handoffState{kind: b[1]}
	if h.kind != kindUpstream && h.kind != kindReverse {
		return bad("kind %q", h.kind)
	}
	rest := b[2:]
	fields := make([][]byte, n, 6)
	for i := range fields {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)-k) {
			return bad("field %d is cut short", i)
		}
		fields[i], rest = rest[k:k+int(n)], rest[k+int(n):]
	}
	if len(rest) != 0 {
		return bad("%d bytes after the last field", len(rest))
	}
	h.session, h.version = string(fields[0]), string(fields[1])
	if len(fields[2]) > 0 {
		h.caps = json.RawMessage(bytes.Clone(fields[2]))
	}
	if len(fields[3]) > 0 {
		h.info = json.RawMessage(bytes.Clone(fields[3]))
	}
	fields = fields[:6] // layout 1: no level, no subscriptions
	if len(fields[4]) > 0 {
		h.level = json.RawMessage(bytes.Clone(fields[4]))
	}
	subs, err := decodeURIs(fields[5])
	if err != nil {
		return bad("subscriptions: %v", err)
	}
	h.subs = subs
	switch {
	case !headerSafe(h.session):
		return bad("the upstream session id is not visible ASCII")
	case h.kind == kindReverse && h.session != "":
		return bad("a reverse-bridge session with an upstream session id")
	case len(h.version) > maxVersionBytes || !headerSafe(h.version):
		return bad("protocol version %q", h.version)
	case h.kind == kindReverse && h.version != "" && !protocol.IsSessionVersion(h.version):
		return bad("protocol version %q is not a session version", h.version)
	case h.version == "" && (h.session != "" || h.caps != nil || h.info != nil):
		return bad("a session without a protocol version")
	case !jsonObject(h.caps):
		return bad("capabilities are not a JSON object")
	case !jsonObject(h.info):
		return bad("clientInfo is not a JSON object")
	case h.kind != kindReverse && (h.level != nil || h.subs != nil):
		return bad("an upstream session with a level or subscriptions")
	case h.version == "" && (h.level != nil || h.subs != nil):
		return bad("a level or subscriptions without a protocol version")
	case !levelValid(h.level):
		return bad("the logging level is not a JSON string of at most %d bytes", maxLevelBytes)
	case b[0] == handoffV2 && h.level == nil && h.subs == nil:
		return bad("layout %d with neither a level nor subscriptions", handoffV2) // one encoding per state
	}
	return h, nil
}

// decodeURIs decodes the subscriptions field: URIs, each a uvarint
// length and its bytes, in increasing order; nil when b is empty.
func decodeURIs(b []byte) ([]string, error) {
	var uris []string
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, fmt.Errorf("URI %d is cut short", len(uris))
		}
		uri := string(b[k : k+int(n)])
		if len(uris) > 0 && uri <= uris[len(uris)-1] {
			return nil, fmt.Errorf("URI %d is out of order", len(uris))
		}
		uris, b = append(uris, uri), b[k+int(n):]
	}
	return uris, nil
}

// headerSafe reports whether s has only the characters a session id may
// have (0x21 to 0x7E); "" is.
func headerSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// initialized reports whether the state is of a session past its
// initialize.
func (h handoffState) initialized() bool { return h.version != "" }

// remoteSession is the upstream session a 'u' state resumes, with an
// initialize that renews it when the state has the client's capabilities.
func (h handoffState) remoteSession() *remote.Session {
	s := &remote.Session{ID: h.session, Version: h.version}
	if h.caps != nil {
		info := h.info
		if info == nil {
			info = json.RawMessage(`{"name":"unknown","version":"0"}`) // required by initialize
		}
		s.Init, _ = json.Marshal(struct {
			ProtocolVersion string          `json:"protocolVersion"`
			Capabilities    json.RawMessage `json:"capabilities"`
			ClientInfo      json.RawMessage `json:"clientInfo"`
		}{h.version, h.caps, info})
	}
	return s
}

// reverseSession is the reverse-bridge session an 'r' state resumes.
func (h handoffState) reverseSession() eras.ReverseSession {
	return eras.ReverseSession{Version: h.version, Capabilities: h.caps, ClientInfo: h.info, Level: h.level, Subscriptions: h.subs}
}
