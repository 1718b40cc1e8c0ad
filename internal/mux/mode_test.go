package mux

import "testing"

// TestModeOf: Options select one of three modes, and Modern wins over
// Exclusive (a Modern Mux is shared by the clients of its revision).
func TestModeOf(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want mode
	}{
		{Options{}, modeShared},
		{Options{Exclusive: true}, modeExclusive},
		{Options{Modern: true}, modeModern},
		{Options{Modern: true, Exclusive: true}, modeModern},
	} {
		if got := modeOf(tc.opts); got != tc.want {
			t.Errorf("modeOf(Exclusive=%v, Modern=%v) = %v, want %v", tc.opts.Exclusive, tc.opts.Modern, got, tc.want)
		}
		m := New(tc.opts)
		if m.mode != tc.want {
			t.Errorf("New(Exclusive=%v, Modern=%v).mode = %v, want %v", tc.opts.Exclusive, tc.opts.Modern, m.mode, tc.want)
		}
		m.Close()
	}
}
