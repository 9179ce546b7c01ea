package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFromBuildInfo(t *testing.T) {
	t.Parallel()
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.1",
		Main:      debug.Module{Path: "github.com/delayq/delayq", Version: "v1.4.0"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "0123456789abcdef"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	info := fromBuildInfo(bi)
	require.Equal(t, Info{Version: "v1.4.0", Commit: "0123456789abcdef", Modified: true, GoVersion: "go1.26.1"}, info)
	require.Equal(t, "delayq v1.4.0 commit 0123456789abcdef+modified go1.26.1", info.String())

	bi.Settings = bi.Settings[:2]
	require.Equal(t, "delayq v1.4.0 commit 0123456789abcdef go1.26.1", fromBuildInfo(bi).String())

	// No VCS information, no version: neither is made up.
	bi = &debug.BuildInfo{GoVersion: "go1.26.1"}
	require.Equal(t, "delayq unknown go1.26.1", fromBuildInfo(bi).String())
}

// TestRead reads the test binary's own build information: the toolchain
// stamps its Go version.
func TestRead(t *testing.T) {
	t.Parallel()
	require.Equal(t, runtime.Version(), Read().GoVersion)
}
