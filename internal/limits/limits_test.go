package limits

import (
	"testing"
	"time"
)

func TestLimitsEvictIdle(t *testing.T) {
	clock := &testClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	l := New(&Config{RequestsPerSecond: 1, MaxPrincipals: 2, Now: clock.Now})
	for _, k := range []string{"a", "b"} {
		release, ref := l.AdmitRequest(k, nil)
		if ref != nil {
			t.Fatalf("%s: %v", k, ref.Msg)
		}
		release()
	}
	if _, ref := l.AdmitRequest("c", nil); ref == nil || ref.Msg != "too many principals are active" {
		t.Fatalf("a third principal while both buckets are drained: %v", ref)
	}
	clock.advance(time.Second) // both buckets full again: idle
	release, ref := l.AdmitRequest("c", nil)
	if ref != nil {
		t.Fatalf("c after the others went idle: %s", ref.Msg)
	}
	release()
	if n := len(l.principals); n != 1 {
		t.Errorf("%d principals kept, want 1", n)
	}
}
