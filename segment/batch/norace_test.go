//go:build !race

package batch

// raceEnabled: see race_test.go.
const raceEnabled = false
