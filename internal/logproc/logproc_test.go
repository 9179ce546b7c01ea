package logproc_test

import (
	"context"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/delayq/delayq/internal/logproc"
)

func TestStartReadsAddresses(t *testing.T) {
	cmd := exec.Command("sh", "-c", `echo 'nats at 4222' >&2; echo 'noise'; echo 'http at 8080'; exec sleep 60`)
	p, seen, err := logproc.Start(context.Background(), cmd, 10*time.Second,
		regexp.MustCompile(`http at (\d+)`), regexp.MustCompile(`nats at (\d+)`))
	require.NoError(t, err)
	require.Equal(t, [][]string{{"nats at 4222", "4222"}, {"http at 8080", "8080"}}, seen)
	require.Contains(t, p.Log(), "noise", "stdout and stderr make one log")
	p.Stop(10 * time.Second)
	select {
	case <-p.Done():
	default:
		t.Fatal("Stop returned before the exit")
	}
}

func TestStartFailsWhenTheProcessExits(t *testing.T) {
	cmd := exec.Command("sh", "-c", `echo 'bad flag' >&2; exit 2`)
	_, _, err := logproc.Start(context.Background(), cmd, 10*time.Second, regexp.MustCompile(`ready`))
	require.ErrorContains(t, err, "exited before it was ready")
	require.ErrorContains(t, err, "bad flag")
}

func TestStartTimesOut(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	_, _, err := logproc.Start(context.Background(), cmd, 100*time.Millisecond, regexp.MustCompile(`ready`))
	require.ErrorContains(t, err, "not ready after")
}
