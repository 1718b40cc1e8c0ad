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
	checkLeveled(t, m, 0) // the refused level was taken back
}

// checkLeveled fails unless m counts want clients with a level, and that
// is how many of its clients have one.
func checkLeveled(t *testing.T, m *Mux, want int) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	walked := 0
	for c := range m.clients {
		if c.level >= 0 {
			walked++
		}
	}
	if m.leveled != walked || walked != want {
		t.Errorf("leveled %d, clients with a level %d, want %d", m.leveled, walked, want)
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
	idle := m.Join(newRec()) // never asks for a level: its close changes nothing
	set(b, "warning")
	set(a, "debug")
	set(a, "notice") // a client's second level is still one client
	set(a, "debug")
	checkLeveled(t, m, 2)
	idle.Close()
	a.Close()
	checkLeveled(t, m, 1)
	up.waitFor(t, "the level lowered to warning", func() bool { return len(levelsSent()) == 5 })
	b.Close()
	checkLeveled(t, m, 0)
	up.waitFor(t, "the level back to info", func() bool { return len(levelsSent()) == 6 })
	up.mu.Lock()
	defer up.mu.Unlock()
	want := "warning,debug,notice,debug,warning,info"
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
