package front

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/session"
)

// recordWrites keeps what was written and each Write's slice.
type recordWrites struct {
	out    bytes.Buffer
	writes [][]byte
	fail   int // fail the Write of this number (1-based); 0: never
}

func (r *recordWrites) Write(p []byte) (int, error) {
	r.writes = append(r.writes, p)
	if len(r.writes) == r.fail {
		return 0, errors.New("gone")
	}
	return r.out.Write(p)
}

// writeEvent writes the bytes appendEvent would, small or big, with or
// without an id, and a big event's data is handed to the writer as it is
// (not copied into the buffer); data with line breaks is split as before.
func TestWriteEventSameBytes(t *testing.T) {
	big := `{"jsonrpc":"2.0","id":1,"result":{"t":"` + strings.Repeat("z", directEvent) + `"}}`
	id := func(dst []byte, seq uint64) []byte { return appendID(dst, 7, seq) }
	for _, tc := range []struct {
		name string
		data string
		seq  uint64
	}{
		{"small", `{"jsonrpc":"2.0","id":1,"result":{}}`, 3},
		{"big", big, 4},
		{"big, no id", big, 0},
		{"big with a line break", big[:100] + "\n" + big[100:], 5},
		{"big with a CR", big[:100] + "\r" + big[100:], 6},
		{"cancelled (nil)", "", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ev := session.Event{Seq: tc.seq, Data: []byte(tc.data), Final: true}
			if tc.data == "" {
				ev.Data = nil
			}
			want := appendEvent([]byte("before\n"), ev, id)
			var w recordWrites
			buf, err := writeEvent(&w, []byte("before\n"), ev, id)
			if err != nil {
				t.Fatal(err)
			}
			w.out.Write(buf) // what is left goes out with the next write
			if !bytes.Equal(w.out.Bytes(), want) {
				t.Fatalf("wrote %d bytes that differ from appendEvent's %d", w.out.Len(), len(want))
			}
			direct := false
			for _, p := range w.writes {
				direct = direct || len(p) > 0 && len(ev.Data) > 0 && &p[0] == &ev.Data[0]
			}
			if wantDirect := len(tc.data) >= directEvent && !strings.ContainsAny(tc.data, "\r\n"); direct != wantDirect {
				t.Fatalf("data written as it is: %v, want %v", direct, wantDirect)
			}
		})
	}
	// A failed write is reported, whichever of the two it was.
	for fail := 1; fail <= 2; fail++ {
		w := recordWrites{fail: fail}
		if _, err := writeEvent(&w, nil, session.Event{Seq: 1, Data: []byte(big)}, id); err == nil {
			t.Errorf("write %d failed: no error", fail)
		}
	}
}
