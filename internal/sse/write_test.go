package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
)

func TestAppendEvent(t *testing.T) {
	tests := []struct {
		name string
		ev   Event
		want string
	}{
		{"data only", Event{Data: []byte(`{"jsonrpc":"2.0"}`)}, "data: {\"jsonrpc\":\"2.0\"}\n\n"},
		{"all fields in order", Event{ID: "s1-7", Event: "message", Data: []byte("x"), Retry: 1500 * time.Millisecond},
			"id: s1-7\nevent: message\nretry: 1500\ndata: x\n\n"},
		{"no data", Event{ID: "p"}, "id: p\ndata:\n\n"},
		{"empty data", Event{Data: []byte{}}, "data:\n\n"},
		{"LF", Event{Data: []byte("a\nb")}, "data: a\ndata: b\n\n"},
		{"CRLF", Event{Data: []byte("a\r\nb")}, "data: a\ndata: b\n\n"},
		{"CR", Event{Data: []byte("a\rb")}, "data: a\ndata: b\n\n"},
		{"CR CR LF", Event{Data: []byte("a\r\r\nb")}, "data: a\ndata:\ndata: b\n\n"},
		{"trailing newline", Event{Data: []byte("a\n")}, "data: a\ndata:\n\n"},
		{"only newlines", Event{Data: []byte("\n\n")}, "data:\ndata:\ndata:\n\n"},
		{"leading space kept", Event{ID: " i", Data: []byte(" a")}, "id:  i\ndata:  a\n\n"},
		{"colon in data", Event{Data: []byte(":x")}, "data: :x\n\n"},
		{"retry rounds down", Event{Data: []byte("x"), Retry: 2999 * time.Microsecond}, "retry: 2\ndata: x\n\n"},
		{"retry at least 1ms", Event{Data: []byte("x"), Retry: time.Nanosecond}, "retry: 1\ndata: x\n\n"},
		{"negative retry omitted", Event{Data: []byte("x"), Retry: -time.Second}, "data: x\n\n"},
		{"unicode", Event{ID: "é", Data: []byte("😀\n日本")}, "id: é\ndata: 😀\ndata: 日本\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := AppendEvent([]byte("prefix"), tt.ev)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != "prefix"+tt.want {
				t.Errorf("AppendEvent = %q, want %q", got[len("prefix"):], tt.want)
			}
			var buf bytes.Buffer
			if err := Write(&buf, tt.ev); err != nil {
				t.Fatal(err)
			}
			if buf.String() != tt.want {
				t.Errorf("Write = %q, want %q", buf.String(), tt.want)
			}
		})
	}
}

func TestWriteRejectsBadFields(t *testing.T) {
	for _, ev := range []Event{
		{ID: "a\nb"}, {ID: "a\rb"}, {ID: "a\x00b"},
		{Event: "a\nb"}, {Event: "x\r"}, {Event: "\x00"},
	} {
		var buf bytes.Buffer
		err := Write(&buf, ev)
		if !errors.Is(err, ErrInvalidField) {
			t.Errorf("Write(%q) error = %v, want ErrInvalidField", ev, err)
		}
		if buf.Len() != 0 {
			t.Errorf("Write(%q) wrote %q", ev, buf.String())
		}
		dst, err := AppendEvent([]byte("keep"), ev)
		if err == nil || string(dst) != "keep" {
			t.Errorf("AppendEvent(%q) = %q, %v", ev, dst, err)
		}
	}
}

type errWriter struct{ err error }

func (w errWriter) Write([]byte) (int, error) { return 0, w.err }

func TestWriteReportsWriterError(t *testing.T) {
	boom := errors.New("boom")
	if err := Write(errWriter{boom}, Event{Data: []byte("x")}); !errors.Is(err, boom) {
		t.Errorf("Write error = %v", err)
	}
	if err := WriteComment(errWriter{boom}, "x"); !errors.Is(err, boom) {
		t.Errorf("WriteComment error = %v", err)
	}
}

type countingWriter struct {
	bytes.Buffer
	calls int
}

func (w *countingWriter) Write(p []byte) (int, error) { w.calls++; return w.Buffer.Write(p) }

func TestWriteIsOneWriteCall(t *testing.T) {
	var w countingWriter
	if err := Write(&w, Event{ID: "1", Event: "e", Data: []byte(strings.Repeat("line\n", 1000))}); err != nil {
		t.Fatal(err)
	}
	if w.calls != 1 {
		t.Errorf("Write made %d Write calls", w.calls)
	}
}

func TestWriteComment(t *testing.T) {
	for text, want := range map[string]string{
		"ping":          ": ping\n\n",
		"":              ":\n\n",
		"a\nb":          ": a\n: b\n\n",
		"a\r\nb\rc":     ": a\n: b\n: c\n\n",
		"data: not one": ": data: not one\n\n",
	} {
		var buf bytes.Buffer
		if err := WriteComment(&buf, text); err != nil {
			t.Fatal(err)
		}
		if buf.String() != want {
			t.Errorf("WriteComment(%q) = %q, want %q", text, buf.String(), want)
		}
		// A comment never produces an event.
		if ev, err := NewReader(&buf, 0).Next(); err != io.EOF {
			t.Errorf("reading comment %q: %+v, %v", text, ev, err)
		}
	}
}

func TestAppendEventNoAllocs(t *testing.T) {
	ev := Event{ID: "s1-123", Event: "message", Data: bytes.Repeat([]byte("x"), 1024)}
	dst := make([]byte, 0, 2048)
	if n := testing.AllocsPerRun(100, func() {
		var err error
		if dst, err = AppendEvent(dst[:0], ev); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("AppendEvent allocated %v times", n)
	}
}

func BenchmarkAppendEvent1KB(b *testing.B) {
	ev := Event{ID: "s1-123", Event: "message", Data: bytes.Repeat([]byte(`{"a":"b"},`), 103)}
	dst := make([]byte, 0, 2048)
	b.SetBytes(int64(len(ev.Data)))
	b.ReportAllocs()
	for b.Loop() {
		dst, _ = AppendEvent(dst[:0], ev)
	}
}

func BenchmarkWrite1KB(b *testing.B) {
	ev := Event{ID: "s1-123", Event: "message", Data: bytes.Repeat([]byte(`{"a":"b"},`), 103)}
	var w countingWriter
	b.SetBytes(int64(len(ev.Data)))
	b.ReportAllocs()
	for b.Loop() {
		w.Reset()
		if err := Write(&w, ev); err != nil {
			b.Fatal(err)
		}
	}
}

// AppendRetry writes a retry field alone: a Reader takes the time and
// gets no event before the next one; no retry time writes nothing.
func TestAppendRetry(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, ""},
		{-time.Second, ""},
		{time.Microsecond, "retry: 1\n\n"},
		{1500 * time.Millisecond, "retry: 1500\n\n"},
	} {
		if got := string(AppendRetry([]byte("x"), c.d)); got != "x"+c.want {
			t.Errorf("AppendRetry(%v) = %q, want %q", c.d, got, "x"+c.want)
		}
	}
	b := AppendRetry(nil, 2*time.Second)
	b, _ = AppendEvent(b, Event{ID: "1-1", Data: []byte(`{"a":1}`)})
	r := NewReader(bytes.NewReader(b), 1<<10)
	ev, err := r.Next()
	if err != nil || ev.ID != "1-1" || string(ev.Data) != `{"a":1}` {
		t.Errorf("first event after a retry block: %+v, %v; want the data event", ev, err)
	}
	if r.Retry() != 2*time.Second {
		t.Errorf("retry read as %v, want 2s", r.Retry())
	}
}
