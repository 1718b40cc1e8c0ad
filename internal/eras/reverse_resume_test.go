package eras

import (
	"context"
	"strings"
	"testing"

	"github.com/mcpgate/mcpgate/internal/conn"
)

// TestReverseResume: a session of the reverse bridge tells its owner what
// it keeps of the client's initialize before answering it; a session
// resumed from that elsewhere (another server value, another replica)
// sends its requests with the same _meta, answered with the client's own
// id, without an initialize of its own.
func TestReverseResume(t *testing.T) {
	leaks := revLeaks(t)
	srv := newRevServer(revDiscoverPlain)
	var told []ReverseSession
	initOut := &revStream{}
	first := NewReverseHandoff(srv.open, &revStream{}, 0, testLogger(t), func(s ReverseSession) {
		if initOut.replyCount() != 0 {
			t.Error("told after the initialize answer")
		}
		told = append(told, s)
	}).(*reverseConn)
	revHandle(first, revInitialize, initOut)
	if got := initOut.reply(t); !strings.Contains(got, `"protocolVersion":"2025-11-25"`) {
		t.Fatalf("initialize: %s", got)
	}
	if len(told) != 1 || told[0].Version != "2025-11-25" ||
		string(told[0].Capabilities) != `{"sampling":{},"elicitation":{},"roots":{}}` ||
		string(told[0].ClientInfo) != `{"name":"attacker","version":"9"}` {
		t.Fatalf("told %+v", told)
	}
	first.Close()

	other := newRevServer(revDiscoverPlain) // the second replica's view of the server
	c, err := ResumeReverse(context.Background(), other.open, &revStream{}, 0, testLogger(t), told[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	if v := c.Version(); v != "2025-11-25" {
		t.Errorf("the resumed session's version is %q", v)
	}
	out := &revStream{}
	revHandle(c.(*reverseConn), revCall(`"r1"`, 1), out)
	a := other.attempt(t, 1)
	meta := a.meta(t)
	if string(meta["io.modelcontextprotocol/clientCapabilities"]) != `{"sampling":{},"elicitation":{},"roots":{}}` ||
		string(meta["io.modelcontextprotocol/clientInfo"]) != `{"name":"attacker","version":"9"}` ||
		string(meta["io.modelcontextprotocol/protocolVersion"]) != `"2026-07-28"` {
		t.Errorf("the resumed request's _meta: %s", a.raw)
	}
	a.reply(`{"content":[]}`)
	if got := out.reply(t); !strings.Contains(got, `"id":"r1","result":{"content":[]}`) {
		t.Errorf("reply %s", got)
	}
	c.Close()
	leaks()
}

// TestReverseResumeRefused: a server whose discover the session could not
// have initialized on, or that cannot be reached, resumes nothing.
func TestReverseResumeRefused(t *testing.T) {
	srv := newRevServer(`{"supportedVersions":["2026-07-28"]}`) // no capabilities
	s := ReverseSession{Version: "2025-06-18"}
	if c, err := ResumeReverse(context.Background(), srv.open, &revStream{}, 0, testLogger(t), s, nil); err == nil || c != nil {
		t.Errorf("resumed on a discover without capabilities: %v", err)
	}
	srv = newRevServer(revDiscoverPlain)
	srv.openErr = context.DeadlineExceeded
	open := func(ctx context.Context, g conn.Stream) (conn.StatelessConn, error) { return srv.open(ctx, g) }
	if c, err := ResumeReverse(context.Background(), open, &revStream{}, 0, testLogger(t), s, nil); err != context.DeadlineExceeded || c != nil {
		t.Errorf("resumed with the server unreachable: %v", err)
	}
}
