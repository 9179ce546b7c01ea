package telemetry_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
)

// httptestRecorder serves GET /metrics from h and returns the answer.
func httptestRecorder(t *testing.T, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	require.Equal(t, http.StatusOK, rec.Code)
	return rec.Body.String()
}

// attr is a string attribute, for require.Contains over span attributes.
func attr(key, value string) attribute.KeyValue { return attribute.String(key, value) }
