package mux

import (
	"bytes"
	"context"
	"testing"
)

// TestSetLevelRefusalPassedThrough: when the server refuses
// logging/setLevel, the client gets the server's own code and message.
func TestSetLevelRefusalPassedThrough(t *testing.T) {
	m, up := startShared(t, Options{})
	up.answer("logging/setLevel", rpcErr(-32602, "level not supported here"))
	out := newRec()
	c := m.Join(out)
	c.Handle(context.Background(), request(t, "1", "logging/setLevel", `{"level":"debug"}`), out)
	code, text, isErr := errorCode(t, out.waitReplies(t, 1)[0])
	if !isErr || code != -32602 || text != "level not supported here" {
		t.Fatalf("got %d %q", code, text)
	}
}

// TestLevelLoweredWhenVerboseSessionLeaves: the server's level follows the
// sessions: raised for the most verbose, lowered when it leaves, and back
// to "info" when no session asks any more.
func TestLevelLoweredWhenVerboseSessionLeaves(t *testing.T) {
	m, up := startShared(t, Options{})
	up.answer("logging/setLevel", result(`{}`))
	a, b := m.Join(newRec()), m.Join(newRec())
	set := func(c *Client, level string) {
		out := newRec()
		c.Handle(context.Background(), request(t, "1", "logging/setLevel", `{"level":"`+level+`"}`), out)
		if _, _, isErr := errorCode(t, out.waitReplies(t, 1)[0]); isErr {
			t.Fatal("setLevel refused")
		}
	}
	levelsSent := func() []string {
		var got []string
		for _, msg := range up.writtenLocked("logging/setLevel") {
			for _, l := range levels {
				if bytes.Contains(msg.Raw, []byte(`"`+l+`"`)) {
					got = append(got, l)
				}
			}
		}
		return got
	}
	set(b, "warning")
	set(a, "debug")
	a.Close()
	up.waitFor(t, "the level lowered to warning", func() bool { return len(levelsSent()) == 3 })
	b.Close()
	up.waitFor(t, "the level back to info", func() bool { return len(levelsSent()) == 4 })
	up.mu.Lock()
	defer up.mu.Unlock()
	want := "warning,debug,warning,info"
	if got := levelsSent(); joinComma(got) != want {
		t.Fatalf("levels sent %v, want %s", got, want)
	}
}

func joinComma(s []string) string {
	var b bytes.Buffer
	for i, x := range s {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(x)
	}
	return b.String()
}
