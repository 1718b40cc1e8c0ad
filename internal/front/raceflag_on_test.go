//go:build race

package front

// raceEnabled reports a -race build, whose sync.Pool drops items at random
// and whose allocation counts are not those of a release build.
const raceEnabled = true
