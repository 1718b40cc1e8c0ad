//go:build !race

package front

// raceEnabled reports a -race build (raceflag_on_test.go).
const raceEnabled = false
