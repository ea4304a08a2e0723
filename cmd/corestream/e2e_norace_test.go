//go:build !race

package main

// e2eRace builds the broker under test with -race when the tests run
// under the race detector.
const e2eRace = false
