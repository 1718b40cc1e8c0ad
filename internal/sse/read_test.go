package sse

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// readAll reads events until an error and returns them with that error.
func readAll(r *Reader) ([]Event, error) {
	var evs []Event
	for {
		ev, err := r.Next()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

func ev(id, event, data string) Event {
	e := Event{ID: id, Event: event}
	if data != "" {
		e.Data = []byte(data)
	}
	return e
}

func TestReader(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		want   []Event
		err    error
		lastID string
	}{
		{"one event", "data: hello\n\n", []Event{ev("", "", "hello")}, io.EOF, ""},
		{"CRLF", "id: 1\r\ndata: a\r\ndata: b\r\n\r\n", []Event{ev("1", "", "a\nb")}, io.EOF, "1"},
		{"CR", "id: 1\rdata: a\rdata: b\r\r", []Event{ev("1", "", "a\nb")}, io.EOF, "1"},
		{"mixed endings", "data: a\r\ndata: b\rdata: c\n\r\n", []Event{ev("", "", "a\nb\nc")}, io.EOF, ""},
		{"BOM skipped", "\uFEFFdata: x\n\n", []Event{ev("", "", "x")}, io.EOF, ""},
		{"only first BOM skipped", "\uFEFF\uFEFFdata: x\n\ndata: y\n\n", []Event{ev("", "", "y")}, io.EOF, ""},
		{"comments", ": hi\ndata: x\n: mid\n\n:\n\n", []Event{ev("", "", "x")}, io.EOF, ""},
		{"no space after colon", "data:x\n\n", []Event{ev("", "", "x")}, io.EOF, ""},
		{"only one space removed", "data:  x\n\n", []Event{ev("", "", " x")}, io.EOF, ""},
		{"tab not removed", "data:\tx\n\n", []Event{ev("", "", "\tx")}, io.EOF, ""},
		{"colon in value", "data: a:b\n\n", []Event{ev("", "", "a:b")}, io.EOF, ""},
		{"field without colon", "data\ndata\n\n", []Event{ev("", "", "\n")}, io.EOF, ""},
		{"empty data line dispatches", "data:\n\n", []Event{ev("", "", "")}, io.EOF, ""},
		{"two empty data lines", "data\ndata\ndata\n\n", []Event{ev("", "", "\n\n")}, io.EOF, ""},
		{"event type", "event: endpoint\ndata: /messages?s=1\n\n", []Event{ev("", "endpoint", "/messages?s=1")}, io.EOF, ""},
		{"event type not carried over", "event: a\ndata: 1\n\ndata: 2\n\n", []Event{ev("", "a", "1"), ev("", "", "2")}, io.EOF, ""},
		{"event type without data dropped", "event: a\n\ndata: 2\n\n", []Event{ev("", "", "2")}, io.EOF, ""},
		{"unknown fields ignored", "foo: bar\ndata: x\nDATA: y\n\n", []Event{ev("", "", "x")}, io.EOF, ""},
		{"priming event", "id: s1-0\ndata:\n\n", []Event{ev("s1-0", "", "")}, io.EOF, "s1-0"},
		{"id only dispatches", "id: 5\n\n", []Event{ev("5", "", "")}, io.EOF, "5"},
		{"id persists, not repeated", "id: 5\ndata: a\n\ndata: b\n\n", []Event{ev("5", "", "a"), ev("", "", "b")}, io.EOF, "5"},
		{"empty id resets", "id: 5\ndata: a\n\nid\ndata: b\n\n", []Event{ev("5", "", "a"), ev("", "", "b")}, io.EOF, ""},
		{"id with NUL ignored", "id: 7\ndata: a\n\nid: 8\x009\ndata: b\n\n", []Event{ev("7", "", "a"), ev("", "", "b")}, io.EOF, "7"},
		{"last id field wins", "id: 1\nid: 2\ndata: a\n\n", []Event{ev("2", "", "a")}, io.EOF, "2"},
		{"blank lines between", "\n\n\ndata: a\n\n\n\ndata: b\n\n", []Event{ev("", "", "a"), ev("", "", "b")}, io.EOF, ""},
		{"empty stream", "", nil, io.EOF, ""},
		{"comment at end without newline", "data: a\n\n: bye", []Event{ev("", "", "a")}, io.EOF, ""},
		{"ends inside event", "data: a\n\ndata: b\n", []Event{ev("", "", "a")}, io.ErrUnexpectedEOF, ""},
		{"ends inside line", "data: a\n\ndata: b", []Event{ev("", "", "a")}, io.ErrUnexpectedEOF, ""},
		{"id of unfinished event not kept", "id: 1\ndata: a\n\nid: 2\ndata: b\n", []Event{ev("1", "", "a")}, io.ErrUnexpectedEOF, "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, mode := range []string{"whole", "one byte"} {
				var src io.Reader = strings.NewReader(tt.in)
				if mode == "one byte" {
					src = iotest.OneByteReader(src)
				}
				r := NewReader(src, 0)
				got, err := readAll(r)
				if err != tt.err {
					t.Errorf("%s: error = %v, want %v", mode, err, tt.err)
				}
				if !eventsEqual(got, tt.want) {
					t.Errorf("%s: events = %q, want %q", mode, got, tt.want)
				}
				if r.LastEventID() != tt.lastID {
					t.Errorf("%s: LastEventID = %q, want %q", mode, r.LastEventID(), tt.lastID)
				}
				if _, err2 := r.Next(); err2 != err {
					t.Errorf("%s: error not sticky: %v then %v", mode, err, err2)
				}
			}
		})
	}
}

func eventsEqual(a, b []Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].ID != b[i].ID || a[i].Event != b[i].Event || a[i].Retry != b[i].Retry || !bytes.Equal(a[i].Data, b[i].Data) {
			return false
		}
	}
	return true
}

func TestReaderRetry(t *testing.T) {
	tests := []struct {
		in        string
		evRetry   time.Duration
		reconnect time.Duration
	}{
		{"retry: 3000\ndata: x\n\n", 3 * time.Second, 3 * time.Second},
		{"retry:0\ndata: x\n\n", 0, 0},
		{"retry: 12a\ndata: x\n\n", 0, 0},
		{"retry: -5\ndata: x\n\n", 0, 0},
		{"retry: 1.5\ndata: x\n\n", 0, 0},
		{"retry: \ndata: x\n\n", 0, 0},
		{"retry:  5\ndata: x\n\n", 0, 0},
		{"retry: 99999999999999999999\ndata: x\n\n", 0, 0},
		{"retry: 100\n\ndata: x\n\n", 0, 100 * time.Millisecond}, // not dispatched, still applies
	}
	for _, tt := range tests {
		r := NewReader(strings.NewReader(tt.in), 0)
		e, err := r.Next()
		if err != nil {
			t.Fatalf("%q: %v", tt.in, err)
		}
		if e.Retry != tt.evRetry || r.Retry() != tt.reconnect {
			t.Errorf("%q: event retry %v, reconnect %v; want %v, %v", tt.in, e.Retry, r.Retry(), tt.evRetry, tt.reconnect)
		}
	}
}

func TestReaderSizeLimit(t *testing.T) {
	const limit = 100
	big := strings.Repeat("x", limit+1)
	in := "data: small\n\n" +
		"id: 1\ndata: " + big + "\nid: 2\ndata: more\n\n" + // one line over the limit
		"data: " + strings.Repeat("y", 60) + "\ndata: " + strings.Repeat("y", 40) + "\n\n" + // 60+1+40 = 101
		"data: " + strings.Repeat("z", limit) + "\n\n" + // exactly the limit: fine
		": " + strings.Repeat("c", 10*limit) + "\n" + // long comment: ignored
		"foo: " + strings.Repeat("c", 10*limit) + "\n" + // long unknown field: ignored
		"id: " + big + "\n\n" + // long id: too large
		"event: " + strings.Repeat("e", 10*limit) + "\n\n" + // long event type: too large
		"data: after\n\n"
	for _, mode := range []string{"whole", "one byte"} {
		var src io.Reader = strings.NewReader(in)
		if mode == "one byte" {
			src = iotest.OneByteReader(src)
		}
		r := NewReader(src, limit)
		var got []string
		for {
			e, err := r.Next()
			if errors.Is(err, ErrEventTooLarge) {
				got = append(got, "too large")
				continue
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", mode, err)
			}
			if len(e.Data) > limit {
				t.Fatalf("%s: event of %d bytes over limit", mode, len(e.Data))
			}
			got = append(got, string(e.Data))
		}
		want := []string{"small", "too large", "too large", strings.Repeat("z", limit), "too large", "too large", "after"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %q\nwant %q", mode, got, want)
		}
		if r.LastEventID() != "" {
			t.Errorf("%s: LastEventID = %q, want the oversized events' ids discarded", mode, r.LastEventID())
		}
	}
}

func TestReaderLongLineSmallBuffer(t *testing.T) {
	// Lines far longer than bufio's 4 KiB buffer, delivered in small reads.
	data := strings.Repeat("0123456789", 100_000)
	in := "data: " + data + "\r\ndata: " + data + "\r\n\r\n"
	r := NewReader(iotest.HalfReader(strings.NewReader(in)), 0)
	e, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	if string(e.Data) != data+"\n"+data {
		t.Fatalf("got %d bytes, want %d", len(e.Data), 2*len(data)+1)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("second Next: %v", err)
	}
}

func TestReaderPassesOnReadError(t *testing.T) {
	boom := errors.New("boom")
	r := NewReader(io.MultiReader(strings.NewReader("data: a\n\ndata: b\n"), iotest.ErrReader(boom)), 0)
	if e, err := r.Next(); err != nil || string(e.Data) != "a" {
		t.Fatalf("first event: %q, %v", e.Data, err)
	}
	if _, err := r.Next(); !errors.Is(err, boom) {
		t.Fatalf("error = %v, want boom", err)
	}
}

func TestReaderDataNotAliased(t *testing.T) {
	r := NewReader(strings.NewReader("data: first\n\ndata: second\n\n"), 0)
	a, _ := r.Next()
	b, _ := r.Next()
	if string(a.Data) != "first" || string(b.Data) != "second" {
		t.Fatalf("events overwrote each other: %q %q", a.Data, b.Data)
	}
}

// normalize is what a data value becomes after a trip through the format:
// every line break is "\n".
func normalize(b []byte) []byte {
	b = bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
	return bytes.ReplaceAll(b, []byte("\r"), []byte("\n"))
}

func TestRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{"a", "xyz", " ", ":", "\n", "\r", "\r\n", "é", "😀", "日本", "data: ", "id: 1", "\x00", "\uFEFF", "{\"k\":1}"}
	random := func(n int, allowBreaks bool) string {
		var sb strings.Builder
		for range rng.IntN(n) {
			p := pieces[rng.IntN(len(pieces))]
			if !allowBreaks && strings.ContainsAny(p, "\r\n\x00") {
				continue
			}
			sb.WriteString(p)
		}
		return sb.String()
	}
	var stream bytes.Buffer
	var want []Event
	for range 500 {
		e := Event{ID: random(4, false), Event: random(3, false), Data: []byte(random(20, true))}
		if rng.IntN(4) == 0 {
			e.Retry = time.Duration(rng.IntN(100000)) * time.Millisecond
		}
		if err := Write(&stream, e); err != nil {
			t.Fatal(err)
		}
		if rng.IntN(3) == 0 {
			if err := WriteComment(&stream, random(5, true)); err != nil {
				t.Fatal(err)
			}
		}
		e.Data = normalize(e.Data)
		if len(e.Data) == 0 {
			e.Data = nil
		}
		want = append(want, e)
	}
	for _, mode := range []string{"whole", "one byte"} {
		var src io.Reader = bytes.NewReader(stream.Bytes())
		if mode == "one byte" {
			src = iotest.OneByteReader(src)
		}
		got, err := readAll(NewReader(src, 0))
		if err != io.EOF {
			t.Fatalf("%s: %v", mode, err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: read %d events, wrote %d", mode, len(got), len(want))
		}
		for i := range got {
			if !eventsEqual(got[i:i+1], want[i:i+1]) {
				t.Fatalf("%s: event %d = %+q, want %+q", mode, i, got[i], want[i])
			}
		}
	}
}

func BenchmarkReaderNext1KB(b *testing.B) {
	var stream bytes.Buffer
	e := Event{ID: "s1-123", Event: "message", Data: bytes.Repeat([]byte(`{"a":"b"},`), 103)}
	for range 1000 {
		if err := Write(&stream, e); err != nil {
			b.Fatal(err)
		}
	}
	src := bytes.NewReader(stream.Bytes())
	r := NewReader(src, 0)
	b.SetBytes(int64(len(e.Data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Next(); err == io.EOF {
			src.Reset(stream.Bytes())
			r = NewReader(src, 0)
		} else if err != nil {
			b.Fatal(err)
		}
	}
}
