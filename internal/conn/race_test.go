//go:build race

package conn

// raceEnabled reports a -race build, in which sync.Pool drops items at
// random, so allocation counts that rely on pooling are not checked.
const raceEnabled = true
