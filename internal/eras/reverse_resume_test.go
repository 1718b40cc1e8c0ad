package eras

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

// TestReverseResumeLevelAndSubscriptions: a session tells its owner its
// level after a logging/setLevel and its URIs after each subscribe or
// unsubscribe that changed them, before answering; a session resumed from
// the last state sends its requests with that level and asks its listen
// for those URIs, with no setLevel or subscribe of its own.
func TestReverseResumeLevelAndSubscriptions(t *testing.T) {
	leaks := revLeaks(t)
	srv := newRevServer(revDiscoverListen)
	var mu sync.Mutex
	var told []ReverseSession
	first := NewReverseHandoff(srv.open, &revStream{}, time.Minute, testLogger(t), func(s ReverseSession) {
		mu.Lock()
		told = append(told, s)
		mu.Unlock()
	}).(*reverseConn)
	last := func() ReverseSession {
		mu.Lock()
		defer mu.Unlock()
		return told[len(told)-1]
	}
	revInit(t, first)
	srv.listen(t, 1).out.Send([]byte(revAck))
	if s := last(); s.Level != nil || s.Subscriptions != nil {
		t.Fatalf("told after initialize: %+v", s)
	}
	out := &revStream{}
	revHandle(first, `{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"debug"}}`, out)
	if got := out.reply(t); got != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Fatalf("setLevel: %s", got)
	}
	if s := last(); string(s.Level) != `"debug"` || s.Version != "2025-11-25" {
		t.Fatalf("told after setLevel: %+v", s)
	}
	for i, uri := range []string{"mem://b", "mem://a", "mem://c"} {
		sub := revSubscribe(first, strconv.Itoa(10+i), uri)
		srv.listen(t, 2+i).out.Send([]byte(revAck))
		sub.reply(t)
	}
	out = &revStream{}
	revHandle(first, `{"jsonrpc":"2.0","id":20,"method":"resources/unsubscribe","params":{"uri":"mem://c"}}`, out)
	srv.listen(t, 5).out.Send([]byte(revAck))
	out.reply(t)
	mu.Lock()
	n := len(told)
	mu.Unlock()
	s := last()
	if string(s.Level) != `"debug"` || !slices.Equal(s.Subscriptions, []string{"mem://a", "mem://b"}) {
		t.Fatalf("told after the subscriptions: %+v", s)
	}
	// Subscribing again to what the session has changes nothing: not told.
	sub := revSubscribe(first, "21", "mem://a")
	sub.reply(t)
	mu.Lock()
	if len(told) != n {
		t.Errorf("told %d times after a subscribe that changed nothing, want %d", len(told), n)
	}
	mu.Unlock()
	first.Close()

	other := newRevServer(revDiscoverListen) // the second replica's view of the server
	c, err := ResumeReverse(context.Background(), other.open, &revStream{}, time.Minute, testLogger(t), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := other.listen(t, 1)
	if got := string(l.params(t)["notifications"]); got != `{"toolsListChanged":true,"resourceSubscriptions":["mem://a","mem://b"]}` {
		t.Errorf("the resumed session's listen asks for %s", got)
	}
	l.out.Send([]byte(revAck))
	out = &revStream{}
	revHandle(c.(*reverseConn), revCall(`"r1"`, 1), out)
	a := other.attempt(t, 1)
	if got := string(a.meta(t)["io.modelcontextprotocol/logLevel"]); got != `"debug"` {
		t.Errorf("the resumed request's level is %s: %s", got, a.raw)
	}
	a.reply(`{"content":[]}`)
	if got := out.reply(t); !strings.Contains(got, `"id":"r1","result":{"content":[]}`) {
		t.Errorf("reply %s", got)
	}
	c.Close()
	leaks()
}

// TestReverseTellsOneAtATime: a change made while another is being told
// is not told on a goroutine of its own (its answer goes out at once);
// the goroutine telling tells the newest state once done, so calls never
// overlap and the last one has the newest level.
func TestReverseTellsOneAtATime(t *testing.T) {
	leaks := revLeaks(t)
	srv := newRevServer(revDiscoverPlain)
	var (
		mu      sync.Mutex
		told    []ReverseSession
		hold    bool
		telling atomic.Int32
	)
	entered, release := make(chan struct{}), make(chan struct{})
	c := NewReverseHandoff(srv.open, &revStream{}, 0, testLogger(t), func(s ReverseSession) {
		if telling.Add(1) != 1 {
			t.Error("two calls at once")
		}
		defer telling.Add(-1)
		mu.Lock()
		told = append(told, s)
		wait := hold
		hold = false
		mu.Unlock()
		if wait {
			close(entered)
			<-release
		}
	}).(*reverseConn)
	revInit(t, c)
	setLevel := func(id, level string) *revStream {
		out := &revStream{}
		revHandle(c, `{"jsonrpc":"2.0","id":`+id+`,"method":"logging/setLevel","params":{"level":"`+level+`"}}`, out)
		return out
	}
	mu.Lock()
	hold = true
	mu.Unlock()
	first := make(chan *revStream)
	go func() { first <- setLevel("1", "info") }()
	<-entered // the first setLevel's goroutine is telling, held
	for i, level := range []string{"warning", "error"} {
		if got := setLevel(strconv.Itoa(2+i), level).reply(t); got != `{"jsonrpc":"2.0","id":`+strconv.Itoa(2+i)+`,"result":{}}` {
			t.Errorf("setLevel %s: %s", level, got)
		}
	}
	close(release)
	if got := (<-first).reply(t); got != `{"jsonrpc":"2.0","id":1,"result":{}}` {
		t.Errorf("the first setLevel: %s", got)
	}
	mu.Lock()
	var levels []string
	for _, s := range told {
		levels = append(levels, string(s.Level))
	}
	mu.Unlock()
	if !slices.Equal(levels, []string{"", `"info"`, `"error"`}) {
		t.Errorf("told levels %q, want the initialize's, the first setLevel's and the newest", levels)
	}
	c.Close()
	leaks()
}

// TestReverseApply: a session held here given a newer state of itself
// (ApplyReverse: a logging/setLevel and subscriptions made through another
// replica) sends its next requests with the new level and renews its
// listen for the new set, without telling its owner; a state taking the
// level and subscriptions away takes them away here too.
func TestReverseApply(t *testing.T) {
	leaks := revLeaks(t)
	srv := newRevServer(revDiscoverListen)
	var told atomic.Int32
	s := ReverseSession{Version: "2025-11-25", Level: []byte(`"info"`), Subscriptions: []string{"mem://a"}}
	c, err := ResumeReverse(context.Background(), srv.open, &revStream{}, time.Minute, testLogger(t), s, func(ReverseSession) { told.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	listens := func(n int, want string) {
		t.Helper()
		l := srv.listen(t, n)
		if got := string(l.params(t)["notifications"]); got != want {
			t.Errorf("listen %d asks for %s, want %s", n, got, want)
		}
		l.out.Send([]byte(revAck))
	}
	level := func(n int, id string) string {
		t.Helper()
		out := &revStream{}
		revHandle(c.(*reverseConn), revCall(id, 1), out)
		a := srv.attempt(t, n)
		a.reply(`{"content":[]}`)
		out.reply(t)
		return string(a.meta(t)["io.modelcontextprotocol/logLevel"])
	}
	listens(1, `{"toolsListChanged":true,"resourceSubscriptions":["mem://a"]}`)
	if got := level(1, `"r1"`); got != `"info"` {
		t.Fatalf("level before the newer state: %s", got)
	}

	ApplyReverse(c, ReverseSession{Version: "2025-11-25", Level: []byte(`"debug"`), Subscriptions: []string{"mem://a", "mem://b"}})
	listens(2, `{"toolsListChanged":true,"resourceSubscriptions":["mem://a","mem://b"]}`)
	if got := level(2, `"r2"`); got != `"debug"` {
		t.Errorf("level after the newer state: %s, want \"debug\"", got)
	}
	ApplyReverse(c, ReverseSession{Version: "2025-11-25"})
	listens(3, `{"toolsListChanged":true}`)
	if got := level(3, `"r3"`); got != "" {
		t.Errorf("level after a state without one: %s, want none", got)
	}
	if n := told.Load(); n != 0 {
		t.Errorf("the owner was told %d times of states it gave", n)
	}
	c.Close()
	ApplyReverse(c, s)                                                    // closed: nothing, no listen
	ApplyReverse(NewReverse(srv.open, &revStream{}, 0, testLogger(t)), s) // not initialized: nothing
	leaks()
}
