package httptransport

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadBodyGrowsWithData checks that a body declared as 32 MiB that
// sends 10 bytes costs what arrived, not what was declared. It does not run
// in parallel: it measures the process's allocations.
func TestReadBodyGrowsWithData(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "/v1/jobs/batch", strings.NewReader(`{"jobs":[]`))
	r.Header.Set("Content-Type", "application/json")
	r.ContentLength = 32 << 20
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	data, release, err := readBody(httptest.NewRecorder(), r, MaxRequestBytesDefault)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	require.Equal(t, `{"jobs":[]`, string(data))
	release()
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "readBody allocated for the declared length")
}
