//go:build race

package front

// raceEnabled reports a -race build, in which sync.Pool drops some of what
// it is given, so bounds on pooled allocations are loosened.
const raceEnabled = true
