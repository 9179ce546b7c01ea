//go:build !race

package main

// raceEnabled is true when the tests run with -race; the binary under test
// is then built with -race too.
const raceEnabled = false
