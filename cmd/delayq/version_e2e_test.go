package main

import (
	"net/http"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestVersionCLI: `delayq version` and `delayq --version` print the same
// line, with the binary's Go version, and a running `delayq serve` answers
// the same build on GET /v1/version.
func TestVersionCLI(t *testing.T) {
	t.Parallel()
	code, version, stderr := runCLI(t, "version")
	require.Equal(t, exitOK, code, stderr)
	require.True(t, strings.HasPrefix(version, "delayq "), version)
	require.True(t, strings.HasSuffix(version, " "+runtime.Version()+"\n"), "the Go version that built it: %q", version)
	code, flag, stderr := runCLI(t, "--version")
	require.Equal(t, exitOK, code, stderr)
	require.Equal(t, version, flag)
	code, _, stderr = runCLI(t, "version", "extra")
	require.Equal(t, exitUsage, code)
	require.Contains(t, stderr, `unknown command "extra"`)

	// The toolchain's record of the binary, which `go version -m` reads,
	// is what the command prints.
	out, err := exec.Command("go", "version", "-m", binary(t)).Output()
	require.NoError(t, err)
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "mod" {
			require.True(t, strings.HasPrefix(version, "delayq "+f[2]+" "), "module version %s in %q", f[2], version)
		}
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "build\tvcs.revision="); ok && k == "" {
			require.Contains(t, version, " commit "+v)
		}
	}

	srv := startServer(t, "--backend", "memory", "--http", "127.0.0.1:0", "--nats-listen", "off")
	var v struct {
		Version   string `json:"version"`
		Commit    string `json:"commit"`
		GoVersion string `json:"go_version"`
	}
	newCaller(t, srv.HTTPURL).callJSON(http.MethodGet, "/v1/version", nil, http.StatusOK, &v)
	require.Equal(t, runtime.Version(), v.GoVersion)
	require.True(t, strings.HasPrefix(version, "delayq "+v.Version+" "), "%+v against %q", v, version)
	if v.Commit != "" {
		require.Contains(t, version, " commit "+v.Commit)
	}
}
