package servers

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestAttackRemoteProbeBrokenStreamNotAVerdict(t *testing.T) {
	var first atomic.Bool
	first.Store(true)
	remote := newStatelessRemote(t, func(w http.ResponseWriter, id string) {
		if first.Swap(false) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			c, _, _ := w.(http.Hijacker).Hijack()
			c.Close()
			return
		}
		modernDiscover(w, id)
	})
	s := newRemoteServer(t, remote.ts.URL+"/mcp")
	c, err := s.OpenStateless(context.Background(), newRecording(), "2026-07-28", []byte("{}"))
	if err == nil {
		defer c.Close()
		if c.Passthrough() {
			out := newRecording()
			handleMsg(t, c, toolCall("1", "echo"), out)
			got := out.reply(t)
			if strings.Contains(got, "-32022") {
				t.Fatalf("after a broken probe, requests are refused: %s", got)
			}
		}
	}
	// After the backoff a new probe should happen and succeed. The sleep is
	// the scenario (the 1 s probe backoff passing), not a wait for a
	// result: a busy machine only makes it longer.
	time.Sleep(1200 * time.Millisecond)
	c2, err := s.OpenStateless(context.Background(), newRecording(), "2026-07-28", []byte("{}"))
	if err != nil {
		t.Fatalf("second OpenStateless: %v", err)
	}
	defer c2.Close()
	out := newRecording()
	handleMsg(t, c2, toolCall("2", "echo"), out)
	if got := out.reply(t); !strings.Contains(got, `"text":"echo"`) {
		t.Errorf("after a broken probe the remote stays refused (probes %d): %s", remote.probes.Load(), got)
	}
}
