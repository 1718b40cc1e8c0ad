package servers

import (
	"slices"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/config"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// applyOf returns the function the connection opened with s registered
// for newer states of its session.
func (s *handoffSink) applyOf(t *testing.T) func([]byte) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.apply == nil {
		t.Fatal("the connection registered no function for newer states")
	}
	return s.apply
}

// TestRemoteHeldSessionFollowsRenewal: two replicas hold one upstream
// session; the remote forgets it and replica B renews it. Given B's newer
// state, replica A switches to the renewed upstream session: its next
// call is answered with no initialize of its own (the remote saw the
// client's and B's renewal only). A state of another kind, or one that
// does not parse, changes nothing.
func TestRemoteHeldSessionFollowsRenewal(t *testing.T) {
	remote := newEchoRemote(t)
	url := remote.ts.URL + "/mcp"
	a, b := newRemoteServer(t, url), newRemoteServer(t, url)
	var sinkA, sinkB handoffSink
	ca := openPortable(t, a, &sinkA)
	old, state := sinkA.last(t)
	testkit.WaitFor(t, "A's notifications/initialized", func() bool { return remote.inited.Load() == 1 })
	cb := resumeOn(t, b, &sinkB, state)
	remote.forget(t, old.session)

	out := newRecording()
	handleMsg(t, cb, echoCall("7", "renewed by B"), out)
	if got := out.reply(t); !strings.Contains(got, `"id":7,"result"`) {
		t.Fatalf("B's tools/call after the remote forgot the session: %s", got)
	}
	renewed, newer := sinkB.last(t)
	if renewed.session == "" || renewed.session == old.session {
		t.Fatalf("B's renewed state: %+v", renewed)
	}
	if n := len(remote.initializes()); n != 2 {
		t.Fatalf("%d initializes before A was told, want the client's and B's", n)
	}

	apply := sinkA.applyOf(t)
	apply([]byte("not a state"))
	apply(renewedReverse().encode())
	apply(newer)
	n := sinkA.count()
	for i, text := range []string{"A after", "A again"} {
		out := newRecording()
		handleMsg(t, ca, echoCall(string(rune('1'+i)), text), out)
		if got := out.reply(t); !strings.Contains(got, `"result"`) || !strings.Contains(got, text) {
			t.Errorf("A's tools/call on the renewed session: %s", got)
		}
	}
	if inits := remote.initializes(); len(inits) != 2 {
		t.Errorf("%d initializes at the remote, want 2: A renewed the session again instead of following B's", len(inits))
	}
	if got := sinkA.count(); got != n {
		t.Errorf("A handed off %d states after it was given B's, want none", got-n)
	}
}

// renewedReverse is a reverse-bridge state, of a kind an upstream session
// does not take.
func renewedReverse() handoffState {
	return handoffState{kind: kindReverse, version: "2025-06-18", level: []byte(`"debug"`)}
}

// TestRemoteReverseHeldSessionApplies: a reverse-bridge session held by
// replica B, given the newer state of a logging/setLevel and a
// resources/subscribe made through replica A, sends its next request with
// A's level and asks its listen for A's subscription, though neither went
// through B, and hands nothing off for it.
func TestRemoteReverseHeldSessionApplies(t *testing.T) {
	remoteA, remoteB := newStatelessRemote(t, subscribableDiscover), newStatelessRemote(t, subscribableDiscover)
	a := newRemoteServer(t, remoteA.ts.URL+"/mcp", config.ProtocolModern)
	b := newRemoteServer(t, remoteB.ts.URL+"/mcp", config.ProtocolModern)
	var sinkA, sinkB handoffSink
	ca := openPortable(t, a, &sinkA)
	_, initial := sinkA.last(t)
	cb := resumeOn(t, b, &sinkB, initial)
	for _, msg := range []string{
		`{"jsonrpc":"2.0","id":2,"method":"logging/setLevel","params":{"level":"debug"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"resources/subscribe","params":{"uri":"file:///watched"}}`,
	} {
		out := newRecording()
		handleMsg(t, ca, msg, out)
		out.reply(t)
	}
	h, newer := sinkA.last(t)
	if string(h.level) != `"debug"` || !slices.Equal(h.subs, []string{"file:///watched"}) {
		t.Fatalf("A's state: %+v", h)
	}
	sinkB.applyOf(t)(newer)

	out := newRecording()
	handleMsg(t, cb, echoCall(`"r-1"`, "x"), out)
	if got := out.reply(t); !strings.Contains(got, `"id":"r-1","result"`) {
		t.Errorf("B's tools/call: %s", got)
	}
	call, listen := remoteB.callAndListen(t, "B's call and listen")
	if !strings.Contains(call, `"io.modelcontextprotocol/logLevel":"debug"`) {
		t.Errorf("B's call has not A's level: %s", call)
	}
	if !strings.Contains(listen, `"resourceSubscriptions":["file:///watched"]`) {
		t.Errorf("B's listen does not ask for A's subscription: %s", listen)
	}
	if n := sinkB.count(); n != 0 {
		t.Errorf("B handed off %d states for the one it was given", n)
	}
}
