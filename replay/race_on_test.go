//go:build race

package replay

// raceEnabled: the tests run under the race detector (5–10× slower), which
// leaves out the longest replays.
const raceEnabled = true
