//go:build race

package linux

// raceEnabled: the race runtime multiplies memory use, so memory targets
// are not checked under it.
const raceEnabled = true
