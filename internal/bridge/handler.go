package bridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/mcpgate/mcpgate/internal/jsonrpc"
	"github.com/mcpgate/mcpgate/internal/protocol"
	"github.com/mcpgate/mcpgate/internal/upstream/remote"
)

// The bridge is the remote.Client's Handler: what the server sends goes to
// Stdout, and generations (legacy SSE streams) are followed.

var _ remote.Handler = (*bridge)(nil)

// Started replays the client's initialize on a new upstream session (a
// replaced legacy SSE stream); the first generation is the client's own.
func (b *bridge) Started(gen uint64) {
	if gen <= 1 {
		return
	}
	b.mu.Lock()
	init := b.initMsg
	var id []byte
	if init != nil {
		b.replaySeq++
		id = fmt.Appendf(nil, `"mcpgate-bridge-init-%d"`, b.replaySeq)
		b.replayID = id
	}
	b.mu.Unlock()
	if init == nil {
		return
	}
	msg, err := jsonrpc.Parse(init)
	if err != nil {
		return // unreachable: it was parsed when it was read
	}
	replay := jsonrpc.Splice(nil, init, jsonrpc.Edit{Span: msg.ID, Value: id})
	b.log.Info("new upstream session; replaying the client's initialize", "gen", gen)
	if err := b.client.Send(context.Background(), replay); err != nil {
		b.log.Warn("replaying initialize failed", "err", err)
	}
}

// Line writes one message from the server to Stdout, settling the request
// it answers. A response to no pending request (one the client cancelled,
// or answered with an error already) is dropped: each request gets exactly
// one reply. The reply to a replayed initialize is swallowed and followed
// by notifications/initialized.
func (b *bridge) Line(gen uint64, line []byte) {
	msg, err := jsonrpc.Parse(line)
	if err == nil && msg.Kind == jsonrpc.KindResponse {
		id := msg.Bytes(msg.ID)
		b.mu.Lock()
		replayed := b.replayID != nil && bytes.Equal(id, b.replayID)
		if replayed {
			b.replayID = nil
		}
		_, pending := b.pending[string(id)]
		delete(b.pending, string(id))
		b.settleLocked()
		b.mu.Unlock()
		if !pending && !replayed {
			b.log.Debug("reply to no pending request dropped", "id", string(id))
			return
		}
		if replayed {
			if msg.IsError {
				b.log.Warn("the new upstream session refused the replayed initialize")
				return
			}
			if err := b.client.Send(context.Background(), jsonrpc.Notification(protocol.NotificationInitialized, nil)); err != nil {
				b.log.Warn("sending notifications/initialized failed", "err", err)
			}
			return
		}
	}
	b.write(line)
}

// Oversized logs a message too big to forward; the remote.Client answers
// the request it replied to, if any.
func (b *bridge) Oversized(gen uint64, prefix []byte, size int) {
	b.log.Warn("message from the server exceeds the size limit; dropped", "bytes", size)
}

// Exited answers every request still awaiting a reply when a connection is
// lost: their replies will not come.
func (b *bridge) Exited(gen uint64, err error) {
	if err == nil {
		return
	}
	b.log.Warn("connection to the server lost", "gen", gen, "err", err)
	b.mu.Lock()
	b.replayID = nil
	b.lost = err
	b.mu.Unlock()
	b.failPending("mcpgate: connection to the remote server lost: " + err.Error())
}

// readLine reads one line (without its LF or CRLF) of at most limit bytes.
// A longer line is consumed and reported as tooLong. At EOF it returns the
// unterminated rest, if any, with io.EOF.
func readLine(br *bufio.Reader, limit int) (line []byte, tooLong bool, err error) {
	for {
		chunk, e := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > limit+2 { // room for CRLF
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if e == bufio.ErrBufferFull {
			continue
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if len(line) > limit {
			tooLong, line = true, nil
		}
		return bytes.TrimSpace(line), tooLong, e
	}
}

// idOf returns the id of a message that is valid JSON but not a valid
// JSON-RPC message, if it has a string or number id, so that its error
// reply reaches the right request; nil otherwise (written as null).
func idOf(line []byte) []byte {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	// encoding/json lets invalid UTF-8 through in a RawMessage; such an id
	// would make the error reply itself invalid.
	if json.Unmarshal(line, &m) != nil || len(m.ID) == 0 || !utf8.Valid(m.ID) {
		return nil
	}
	switch m.ID[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return m.ID
	}
	return nil
}
