package servers

import (
	"strings"
	"sync"
	"testing"

	"github.com/mcpgate/mcpgate/internal/conn"
	"github.com/mcpgate/mcpgate/internal/testkit"
)

// TestResumedSessionHoldsStreamWhenTold: the replica that opened a
// session holds its upstream standalone stream; a replica that resumed
// it opens none to serve requests, one when the front says the client's
// standalone stream is there (conn.WithGeneralHeld), and closes it when
// that stream goes.
func TestResumedSessionHoldsStreamWhenTold(t *testing.T) {
	remote := newEchoRemote(t)
	url := remote.ts.URL + "/mcp"
	a, b := newRemoteServer(t, url), newRemoteServer(t, url)
	var sinkA, sinkB handoffSink
	ca := openPortable(t, a, &sinkA)
	testkit.WaitFor(t, "the opening replica's upstream stream", func() bool { return remote.echo.Streams() == 1 })
	_, state := sinkA.last(t)
	ca.CloseWith("the gateway is shutting down")
	a.Close()
	testkit.WaitFor(t, "the opening replica's stream to close with it", func() bool { return remote.echo.Streams() == 0 })

	var mu sync.Mutex
	var held func(bool)
	ctx := conn.WithGeneralHeld(sinkB.ctx(), func(h func(bool)) {
		mu.Lock()
		defer mu.Unlock()
		held = h
	})
	cb, err := b.Resume(ctx, newRecording(), state)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cb.Close)
	out := newRecording()
	handleMsg(t, cb, echoCall(`"b-1"`, "on b"), out)
	if got := out.reply(t); !strings.Contains(got, `"id":"b-1","result"`) {
		t.Fatalf("tools/call on the resumed session: %s", got)
	}
	mu.Lock()
	hold := held
	mu.Unlock()
	if hold == nil {
		t.Fatal("the resumed connection registered no function for the client's stream")
	}
	if n := remote.echo.Streams(); n != 0 {
		t.Fatalf("the resumed replica opened %d upstream streams before the client's stream was there", n)
	}
	hold(true)
	testkit.WaitFor(t, "the resumed replica's upstream stream", func() bool { return remote.echo.Streams() == 1 })
	hold(false)
	testkit.WaitFor(t, "the resumed replica's stream to close with the client's", func() bool { return remote.echo.Streams() == 0 })
}
