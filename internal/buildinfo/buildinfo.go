// Package buildinfo reads the delayq binary's version, commit and Go
// version from what the Go toolchain stamps into every build
// (runtime/debug.ReadBuildInfo), so that a plain `go build` or `go install`
// carries them without linker flags. `delayq version` prints them and GET
// /v1/version answers them.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Info is what a binary says of its build.
type Info struct {
	// Version is the main module's version: a tag such as v1.4.0 for
	// `go install github.com/delayq/delayq/cmd/delayq@v1.4.0`, "(devel)"
	// for a build in a checkout.
	Version string `json:"version"`
	// Commit is the VCS revision the binary was built from (vcs.revision),
	// empty when the build had no VCS information (go build -buildvcs=false,
	// a build outside a checkout).
	Commit string `json:"commit,omitempty"`
	// Modified is true when the checkout had uncommitted changes
	// (vcs.modified).
	Modified bool `json:"modified,omitempty"`
	// GoVersion is the Go release that built the binary.
	GoVersion string `json:"go_version"`
}

// Read returns the running binary's Info. A binary without build
// information (which the toolchain always stamps in module mode) answers
// Version "unknown" with the running Go version.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: "unknown", GoVersion: runtime.Version()}
	}
	return fromBuildInfo(bi)
}

// fromBuildInfo returns the Info of bi.
func fromBuildInfo(bi *debug.BuildInfo) Info {
	info := Info{Version: bi.Main.Version, GoVersion: bi.GoVersion}
	if info.Version == "" {
		info.Version = "unknown"
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Commit = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// String returns the one line `delayq version` prints: version, commit
// (with "+modified" for a dirty checkout) and Go version.
func (i Info) String() string {
	s := "delayq " + i.Version
	if i.Commit != "" {
		s += " commit " + i.Commit
		if i.Modified {
			s += "+modified"
		}
	}
	return s + " " + i.GoVersion
}
