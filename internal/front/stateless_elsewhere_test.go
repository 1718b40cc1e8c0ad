package front

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcpgate/mcpgate/internal/testkit"
)

// A stateless request translated for a server of the session eras waits,
// answered input_required, on the replica that served it; its retry
// landing on another replica is forwarded there (one hop) and answered
// with the server's result, exactly once.
func TestParkedRetryForwardedToItsReplica(t *testing.T) {
	ring, cl := testRing(t), newMemCluster()
	ba, bb := newAtkBackend(mrtrScript), newAtkBackend(mrtrScript)
	a := startReplica(t, cl, "a", ring, ba)
	b := startReplica(t, cl, "b", ring, bb)
	ctx, cancel := ctxT(30 * time.Second)
	defer cancel()

	ir := asInputRequired(t, atkPost(ctx, a.srv.URL, atkBody("1", "tools/call", "sample", "")))
	if n := parkedCount(a.h); n != 1 {
		t.Fatalf("%d requests parked on a, want 1", n)
	}
	r := atkPost(ctx, b.srv.URL, atkBody(`"retry-2"`, "tools/call", "sample", inputAnswers(ir)))
	last := r.last()
	if r.Status != http.StatusOK || !strings.Contains(string(last["id"]), `"retry-2"`) || !strings.Contains(string(last["result"]), "ans-") {
		t.Fatalf("the retry on b: %d %v %q, want the server's result with the answer", r.Status, r.Err, r.Msgs)
	}
	// (Counted once the owner's answer was copied: maybe after the
	// client read it.)
	testkit.WaitFor(t, "b counting the retry forwarded", func() bool { return b.h.Forwards().Forwarded == 1 })
	// On a, the call and its retry (as on one replica); b forwarded
	// before it opened one.
	if ba.opens.Load() != 2 || bb.opens.Load() != 0 {
		t.Errorf("stateless connections opened: a %d, b %d; want 2, 0", ba.opens.Load(), bb.opens.Load())
	}
	if n := waitSessions(a.h, 0, 10*time.Second); n != 0 || parkedCount(a.h) != 0 {
		t.Errorf("after the retry: %d sessions, %d parked on a", n, parkedCount(a.h))
	}
	// The state opened once: the same retry again, on b, is refused by a.
	r = atkPost(ctx, b.srv.URL, atkBody(`"retry-3"`, "tools/call", "sample", inputAnswers(ir)))
	if r.Status != http.StatusBadRequest || !strings.Contains(strings.Join(r.Msgs, ""), "requestState is not valid") {
		t.Errorf("a second retry with the used state: %d %q, want 400", r.Status, r.Msgs)
	}
}

// A retry whose request's replica is gone, or that carries a hop header
// no replica sealed, is not forwarded: the state is not valid here (the
// client starts the request again), and a forged hop is refused.
func TestParkedRetryOwnerGoneOrForgedHop(t *testing.T) {
	ring, cl := testRing(t), newMemCluster()
	a := startReplica(t, cl, "a", ring, newAtkBackend(mrtrScript))
	b := startReplica(t, cl, "b", ring, newAtkBackend(mrtrScript))
	ctx, cancel := ctxT(30 * time.Second)
	defer cancel()

	ir := asInputRequired(t, atkPost(ctx, a.srv.URL, atkBody("1", "tools/call", "sample", "")))
	forged := testRingOf(t, 9).Seal(hopPurpose, nil, time.Minute)
	r := atkPost(ctx, b.srv.URL, atkBody("2", "tools/call", "sample", inputAnswers(ir)), hopHeader, forged)
	if r.Status != http.StatusForbidden {
		t.Errorf("a forged hop: %d %q, want 403", r.Status, r.Msgs)
	}
	// A real hop is never forwarded again: b answers itself.
	r = atkPost(ctx, b.srv.URL, atkBody("3", "tools/call", "sample", inputAnswers(ir)), hopHeader, ring.Seal(hopPurpose, nil, time.Minute))
	if r.Status != http.StatusBadRequest {
		t.Errorf("a hop to a replica without the request: %d %q, want 400", r.Status, r.Msgs)
	}
	if n := parkedCount(a.h); n != 1 {
		t.Fatalf("%d parked on a after refused retries, want 1 (still waiting)", n)
	}

	a.srv.Close() // gone: no heartbeat, and its dial refused (forward.go)
	cl.mu.Lock()
	cl.dead["a"] = true
	cl.mu.Unlock()
	r = atkPost(ctx, b.srv.URL, atkBody("4", "tools/call", "sample", inputAnswers(ir)))
	if r.Status != http.StatusBadRequest || !strings.Contains(strings.Join(r.Msgs, ""), "requestState is not valid") {
		t.Errorf("the request's replica gone: %d %q, want 400", r.Status, r.Msgs)
	}
	if f := b.h.Forwards(); f.Forwarded != 0 || f.Gone != 1 {
		t.Errorf("b's forwards: %+v, want none forwarded, one gone", f)
	}
}

func TestPlaceRoundTrip(t *testing.T) {
	cl := newMemCluster().replica("pod-1", "10.0.0.7:8080")
	instance, advertise, ok := parsePlace(placeOf(cl))
	if !ok || instance != "pod-1" || advertise != "10.0.0.7:8080" {
		t.Errorf("parsePlace(placeOf) = %q %q %v", instance, advertise, ok)
	}
	for _, bad := range []string{"", "\x05pod", "\x03pod", "\x03pod\x00", "\x03pod\x02ab!"} {
		if _, _, ok := parsePlace([]byte(bad)); ok {
			t.Errorf("parsePlace(%q) accepted", bad)
		}
	}
}

func FuzzParsePlace(f *testing.F) {
	f.Add(placeOf(newMemCluster().replica("pod-1", "10.0.0.7:8080")))
	f.Add([]byte("\x03pod\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		instance, advertise, ok := parsePlace(b)
		if !ok {
			return
		}
		if instance == "" || advertise == "" {
			t.Fatalf("accepted an empty part: %q %q", instance, advertise)
		}
		if got := placeOf(newMemCluster().replica(instance, advertise)); string(got) != string(b) {
			t.Fatalf("placeOf(parsePlace(%q)) = %q", b, got)
		}
	})
}
