package aggregate

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// A merged list's cursor says where the next page starts: which member
// (its index in config order) and that member's own cursor ("" for its
// first page). It is opaque to clients: base64url (unpadded) of a version
// byte, the member index as a uvarint, and the member's cursor as is.
// Nothing in it is trusted: a cursor that does not decode, names no member
// or carries a member cursor that is not UTF-8 is -32602.

// cursorVersion is the first byte of every cursor: a later format can tell
// its own cursors from these.
const cursorVersion = 1

// maxCursorLen bounds a client's cursor (base64 text): a member cursor is
// an opaque token, not a document.
const maxCursorLen = 8 << 10

var errBadCursor = errors.New("invalid cursor")

// encodeCursor returns the cursor of member's page at its cursor mc.
func encodeCursor(member int, mc string) string {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(mc))
	b = append(b, cursorVersion)
	b = binary.AppendUvarint(b, uint64(member))
	b = append(b, mc...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor reads a cursor of a list merging members members.
func decodeCursor(c string, members int) (member int, mc string, err error) {
	if c == "" || len(c) > maxCursorLen {
		return 0, "", errBadCursor
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(c)
	if err != nil || len(b) < 2 || b[0] != cursorVersion {
		return 0, "", errBadCursor
	}
	n, size := binary.Uvarint(b[1:])
	if size <= 0 || n >= uint64(members) {
		return 0, "", errBadCursor
	}
	rest := b[1+size:]
	if !utf8.Valid(rest) {
		return 0, "", errBadCursor
	}
	return int(n), string(rest), nil
}

// Server-to-client requests of different members may carry the same id
// (each member's multiplexer numbers its own), so on their way to the
// client their ids become strings naming the member: "m<index>:<id>",
// <id> the member's id as JSON text (a number or a quoted string). The
// client's answer is routed back by it. Nothing is stored: a forged id
// reaches at most a member's own check of its server requests (which only
// accepts answers from the session it asked).

// encodeServerID returns the id (a JSON string) under which member's
// server request with the raw JSON id is sent to the client.
func encodeServerID(member int, id []byte) []byte {
	s := "m" + strconv.Itoa(member) + ":" + string(id)
	q, _ := jsontext.AppendQuote(nil, s) // id is valid JSON, so UTF-8
	return q
}

// decodeServerID reads an id made by encodeServerID: the member and its
// raw JSON id; ok false for anything else.
func decodeServerID(raw []byte, members int) (member int, id []byte, ok bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return 0, nil, false
	}
	u, err := jsontext.AppendUnquote(nil, raw)
	if err != nil {
		return 0, nil, false
	}
	s, found := strings.CutPrefix(string(u), "m")
	if !found {
		return 0, nil, false
	}
	idx, rest, found := strings.Cut(s, ":")
	n, err := strconv.Atoi(idx)
	if !found || err != nil || n < 0 || n >= members || strconv.Itoa(n) != idx {
		return 0, nil, false
	}
	v := jsontext.Value(rest)
	if !v.IsValid() || (v.Kind() != '"' && v.Kind() != '0') {
		return 0, nil, false
	}
	return n, []byte(rest), true
}
