//go:build race

package e2e

// raceEnabled reports whether this test binary was built with -race; the gateway binary under
// test is then built with -race too, so a data race in the gateway fails its clean exit.
const raceEnabled = true
