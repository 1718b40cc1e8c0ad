package mux

// mode is which of the Mux's three state machines runs. New fixes it from
// Options (Modern wins over Exclusive); it never changes, so reading it
// needs no lock. doc.go ("Three modes") says what each owns and how its
// generations and clients move; the branches on it are at the entries:
// runGen and initializeUpstream (a generation's way to Ready),
// Client.request and Client.notification (a client's messages),
// serverRequest and serverNotification (the server's), and
// attributeLocked (whom a server message may reach).
type mode uint8

const (
	// modeShared: one process for every session. The gateway initializes
	// each generation itself and answers each client's initialize from
	// that result; server messages go to the one session they can belong
	// to, or nowhere.
	modeShared mode = iota
	// modeExclusive (Options.Exclusive): one session per process. The
	// client's own initialize is forwarded, and replayed to each later
	// generation; every server message is the session's.
	modeExclusive
	// modeModern (Options.Modern): a server of 2026-07-28, shared by
	// clients of that revision. Each generation is probed with
	// server/discover, never initialized; requests pass untranslated;
	// server requests are refused (modern.go).
	modeModern
)

// modeOf returns the mode opts select.
func modeOf(opts Options) mode {
	switch {
	case opts.Modern:
		return modeModern
	case opts.Exclusive:
		return modeExclusive
	}
	return modeShared
}

func (md mode) String() string {
	switch md {
	case modeShared:
		return "shared"
	case modeExclusive:
		return "exclusive"
	case modeModern:
		return "modern"
	}
	return "unknown"
}
