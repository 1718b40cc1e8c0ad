package aggregate

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// A merged list is answered whole unless Options.PageSize is set and it
// is longer. Then its cursor says where the next page starts: which member
// (its index in config order) and how many of that member's items in the
// merged list come before it. A position by member keeps a page from
// skipping or repeating the other members' items when one member's list
// changes between pages. It is opaque to clients: base64url (unpadded) of
// a version byte and the two numbers as uvarints. Nothing in it is
// trusted: a cursor that does not decode exactly, or names no member, is
// -32602; an offset past the member's items starts at the next member.

// cursorVersion is the first byte of every cursor: a later format can tell
// its own cursors from these (version 1 carried a member's own cursor).
const cursorVersion = 2

// maxCursorLen bounds a client's cursor (base64 text): this one is a
// couple of numbers.
const maxCursorLen = 64

var errBadCursor = errors.New("invalid cursor")

// encodeCursor returns the cursor of the page that starts at member's
// item offset (counted in the merged list).
func encodeCursor(member, offset int) string {
	b := make([]byte, 0, 1+2*binary.MaxVarintLen64)
	b = append(b, cursorVersion)
	b = binary.AppendUvarint(b, uint64(member))
	b = binary.AppendUvarint(b, uint64(offset))
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor reads a cursor of a list merging members members.
func decodeCursor(c string, members int) (member, offset int, err error) {
	if c == "" || len(c) > maxCursorLen {
		return 0, 0, errBadCursor
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(c)
	if err != nil || len(b) < 3 || b[0] != cursorVersion {
		return 0, 0, errBadCursor
	}
	m, n := binary.Uvarint(b[1:])
	if n <= 0 || m >= uint64(members) {
		return 0, 0, errBadCursor
	}
	off, n2 := binary.Uvarint(b[1+n:])
	if n2 <= 0 || off > math.MaxInt32 {
		return 0, 0, errBadCursor
	}
	// Exactly what encodeCursor makes (no trailing bytes, no longer
	// varints): one position, one cursor.
	if encodeCursor(int(m), int(off)) != c {
		return 0, 0, errBadCursor
	}
	return int(m), int(off), nil
}

// Server-to-client requests of different members may carry the same id
// (each member's multiplexer numbers its own), so on their way to the
// client their ids become strings naming the member: "m<index>:<id>",
// <id> the member's id as JSON text (a number or a quoted string). The
// client's answer is routed back by it. Nothing is stored: a forged id
// reaches at most a member's own check of its server requests (which only
// accepts answers from the session it asked).
//
// A member replaced under the same index by a config reload (its slot's
// generation bumped, members.go) numbers its requests anew, so the
// generation is in the id too, "m<index>.<gen>:<id>" (left out while it is
// 0): an answer the client gives late to the old member's request must not
// reach the new member as the answer to its own request with the same id
// (found by the fault tests). Only the canonical spelling decodes.

// encodeServerID returns the id (a JSON string) under which the server
// request with the raw JSON id of member (of generation gen) is sent to the
// client.
func encodeServerID(member int, gen uint64, id []byte) []byte {
	s := "m" + strconv.Itoa(member)
	if gen != 0 {
		s += "." + strconv.FormatUint(gen, 10)
	}
	s += ":" + string(id)
	q, _ := jsontext.AppendQuote(nil, s) // id is valid JSON, so UTF-8
	return q
}

// decodeServerID reads an id made by encodeServerID: the member, its
// generation and its raw JSON id; ok false for anything else.
func decodeServerID(raw []byte, members int) (member int, gen uint64, id []byte, ok bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return 0, 0, nil, false
	}
	u, err := jsontext.AppendUnquote(nil, raw)
	if err != nil {
		return 0, 0, nil, false
	}
	s, found := strings.CutPrefix(string(u), "m")
	if !found {
		return 0, 0, nil, false
	}
	head, rest, found := strings.Cut(s, ":")
	if !found {
		return 0, 0, nil, false
	}
	idx, g, dotted := strings.Cut(head, ".")
	if dotted {
		n, err := strconv.ParseUint(g, 10, 64)
		if err != nil || n == 0 || strconv.FormatUint(n, 10) != g {
			return 0, 0, nil, false
		}
		gen = n
	}
	n, err := strconv.Atoi(idx)
	if err != nil || n < 0 || n >= members || strconv.Itoa(n) != idx {
		return 0, 0, nil, false
	}
	v := jsontext.Value(rest)
	if !v.IsValid() || (v.Kind() != '"' && v.Kind() != '0') {
		return 0, 0, nil, false
	}
	return n, gen, []byte(rest), true
}
