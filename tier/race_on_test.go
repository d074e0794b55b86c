//go:build race

package tier_test

// raceEnabled: the race detector slows these tests ~10x; the long ones run shorter under it.
const raceEnabled = true
