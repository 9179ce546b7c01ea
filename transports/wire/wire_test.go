package wire_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/wire"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestParseDurationText(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{
		"500ms": 500 * time.Millisecond,
		"500":   500 * time.Millisecond,
		" 2h ":  2 * time.Hour,
		"0":     0,
		"-1s":   -time.Second,
		"-1500": -1500 * time.Millisecond,
	} {
		got, err := wire.ParseDurationText("Delayq-Delay", in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", " ", "soon", "1.5", "1e3", `"1s"`, "5 s", "99999999999999999999", "-"} {
		_, err := wire.ParseDurationText("Delayq-Delay", in)
		requireFieldError(t, err, "Delayq-Delay")
	}
}

func TestParseTimeText(t *testing.T) {
	t.Parallel()
	got, err := wire.ParseTimeText("Delayq-Run-At", " 2026-11-21T10:00:00.250+01:00")
	require.NoError(t, err)
	require.True(t, got.Equal(time.Date(2026, 11, 21, 9, 0, 0, 250e6, time.UTC)))
	for _, in := range []string{"", "null", "2026-11-21", "1.7e9", "1700000000.", ".5", "--1", "1_700_000_000",
		"100000000000", `"2026-11-21T10:00:00Z"`} {
		_, err := wire.ParseTimeText("Delayq-Run-At", in)
		requireFieldError(t, err, "Delayq-Run-At")
	}
}

// TestParseUnixSeconds: a time may be a number of Unix seconds, its
// fraction read exactly (a float would make .001 into .000999).
func TestParseUnixSeconds(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Time{
		"1732528800":            time.Date(2024, 11, 25, 10, 0, 0, 0, time.UTC),
		"1732528800.250":        time.Date(2024, 11, 25, 10, 0, 0, 250e6, time.UTC),
		"1732528800.001":        time.Date(2024, 11, 25, 10, 0, 0, 1e6, time.UTC),
		"1732528800.0000000019": time.Date(2024, 11, 25, 10, 0, 0, 1, time.UTC),
		"0":                     time.Unix(0, 0).UTC(),
		"-1.5":                  time.Unix(-2, 5e8).UTC(),
		"99999999999.999999999": time.Unix(99_999_999_999, 999_999_999).UTC(),
		"  1732528800.25\t":     time.Date(2024, 11, 25, 10, 0, 0, 250e6, time.UTC),
	} {
		got, ok, err := wire.ParseTime("run_at", json.RawMessage(in))
		require.NoError(t, err, in)
		require.True(t, ok, in)
		require.True(t, want.Equal(got), "%s: want %s, got %s", in, want, got)
		text, err := wire.ParseTimeText("Delayq-Run-At", strings.TrimSpace(strings.ReplaceAll(in, "\t", "")))
		require.NoError(t, err, in)
		require.True(t, want.Equal(text), "header %s", in)
	}
	for _, in := range []string{"1.7e9", "1e3", "1.", "-", "1.2.3", "100000000000", "17325288000000000000000"} {
		_, _, err := wire.ParseTime("run_at", json.RawMessage(in))
		requireFieldError(t, err, "run_at")
	}
}

func TestAppendDelivery(t *testing.T) {
	t.Parallel()
	runAt := time.Date(2026, 11, 21, 10, 0, 0, 250e6, time.UTC)
	j := &core.Job{ID: "a", Topic: "t.x", Body: json.RawMessage("{ \"x\" : \"<&>\" }"), Attempt: 2,
		RunAt: runAt, Lease: "l", LeaseExpiresAt: runAt.Add(time.Second)}
	require.Equal(t,
		`{"id":"a","topic":"t.x","body":{ "x" : "<&>" },"attempt":2,"run_at":"2026-11-21T10:00:00.250Z","lease":"l","lease_expires_at":"2026-11-21T10:00:01.250Z"}`,
		string(wire.AppendDelivery(nil, j)))
}

func FuzzParseDurationText(f *testing.F) {
	for _, seed := range []string{"500ms", "500", "-1", "", "1h2m", "9999999999h", "9223372036854775807", "+5", "01", " 7 "} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := wire.ParseDurationText("d", s)
		if err != nil {
			requireFieldError(t, err, "d")
			return
		}
		// Whatever parses agrees with one of the two forms.
		if ms, jerr := json.Number(s).Int64(); jerr == nil {
			require.Equal(t, time.Duration(ms)*time.Millisecond, d)
		}
	})
}

func requireFieldError(t *testing.T, err error, field string) {
	t.Helper()
	require.Error(t, err)
	require.True(t, errors.Is(err, core.ErrInvalidArgument), "%v", err)
	fe, ok := errors.AsType[*core.FieldError](err)
	require.True(t, ok, "%T", err)
	require.Equal(t, field, fe.Field)
}

func TestTraceParentFor(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"", "a", "01JD0000000000000000000000", strings.Repeat("x", 128)} {
		tp := wire.TraceParentFor(id)
		require.True(t, wire.ValidTraceParent(tp), "%q: %s", id, tp)
		require.Equal(t, tp[:36], wire.TraceParentFor(id)[:36], "the trace id is the job's")
	}
	require.NotEqual(t, wire.TraceParentFor("a")[:36], wire.TraceParentFor("b")[:36])
}

func TestMatchHost(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		pattern, host string
		want          bool
	}{
		{"*", "anything.example", true},
		{"*.example.com", "hooks.example.com", true},
		{"*.example.com", "a.b.example.com", true},
		{"*.example.com", "example.com", false},
		{"*.example.com", "badexample.com", false},
		{"hooks.example.com", "hooks.example.com", true},
		{"hooks.example.com", "x.hooks.example.com", false},
		{"127.0.0.1", "127.0.0.1", true},
	} {
		require.Equal(t, c.want, wire.MatchHost(c.pattern, c.host), "%s ~ %s", c.pattern, c.host)
	}
}

// TestValidateNext: next is 0 to core.UpcomingMax.
func TestValidateNext(t *testing.T) {
	for _, n := range []int{0, wire.NextRunsDefault, core.UpcomingMax} {
		require.NoError(t, wire.ValidateNext(n), n)
	}
	for _, n := range []int{-1, core.UpcomingMax + 1} {
		requireFieldError(t, wire.ValidateNext(n), "next")
	}
}

// TestScheduleShown: a schedule is shown with its defaults filled, and the
// stored one is left as it is.
func TestScheduleShown(t *testing.T) {
	sc := &core.Schedule{Name: "n", Missed: core.MissedAll}
	v := wire.ScheduleShown(sc)
	require.Equal(t, "UTC", v.TimeZone)
	require.Equal(t, core.MissedLimitDefault, v.MissedLimit)
	require.Empty(t, sc.TimeZone)
	require.Zero(t, sc.MissedLimit)
	v = wire.ScheduleShown(&core.Schedule{TimeZone: "Europe/Paris", MissedLimit: 5})
	require.Equal(t, "Europe/Paris", v.TimeZone)
	require.Equal(t, core.MissedSkip, v.Missed)
	require.Equal(t, 5, v.MissedLimit)
}
