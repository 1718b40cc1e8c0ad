package main

import "log/slog"

// durationText is the gateway logger's ReplaceAttr: a time.Duration is
// written as Go writes it ("1.234s", "1m2.5s", "250ms") in both formats.
// slog's text handler does so already; its JSON handler would write
// integer nanoseconds, so that the same record read "startup=1.234s" in
// one format and "startup":1234000000 in the other. Durations are rounded
// where they are logged (to the millisecond, mostly), not here.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}
