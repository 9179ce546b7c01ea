//go:build !race

package k6_test

// raceEnabled is true when the tests run with -race; the server under test
// is then built with it too.
const raceEnabled = false
