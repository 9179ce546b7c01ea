package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// table reads the output of a list under --output table: a header and
// rows whose cells start where their column's name does. It fails the test
// when a row is not aligned to the header, and returns the rows as maps
// from column name to cell.
func table(t *testing.T, out string) []map[string]string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.NotEmpty(t, lines)
	header := lines[0]
	var names []string
	var starts []int
	for i := 0; i < len(header); {
		if header[i] == ' ' {
			i++
			continue
		}
		j := i
		for j < len(header) && header[j] != ' ' {
			j++
		}
		names, starts = append(names, header[i:j]), append(starts, i)
		i = j
	}
	var rows []map[string]string
	for _, line := range lines[1:] {
		if line == "" {
			break
		}
		row := map[string]string{}
		for k, start := range starts {
			require.Greater(t, len(line), start, "row %q is shorter than the header %q", line, header)
			require.True(t, start == 0 || line[start-1] == ' ' && line[start] != ' ',
				"column %s does not start at %d in %q under %q", names[k], start, line, header)
			end := len(line)
			if k+1 < len(starts) {
				end = starts[k+1]
			}
			row[names[k]] = strings.TrimSpace(line[start:end])
		}
		rows = append(rows, row)
	}
	return rows
}

// keyValues reads the output of one object under --output table: a key
// and its value a row, the values in one column. A key given more than
// once (a schedule's next_run) keeps its values in order.
func keyValues(t *testing.T, out string) map[string][]string {
	t.Helper()
	m := map[string][]string{}
	col := -1
	for line := range strings.SplitSeq(strings.TrimRight(out, "\n"), "\n") {
		key, rest, ok := strings.Cut(line, " ")
		require.True(t, ok, "no value in %q", line)
		value := strings.TrimLeft(rest, " ")
		at := len(line) - len(value)
		if col < 0 {
			col = at
		}
		require.Equal(t, col, at, "the value of %s is not in the column of the others:\n%s", key, out)
		m[key] = append(m[key], value)
	}
	return m
}

// TestClientOutputTable runs the client commands that print against a real
// server with --output table (and DELAYQ_OUTPUT=table): lists are aligned
// columns, single objects key/value rows, and json, the default, stays the
// service's answer on one line. get --trail is a table whatever --output
// says.
func TestClientOutputTable(t *testing.T) {
	t.Parallel()
	p := startServer(t, "--backend", "memory", "--http", "127.0.0.1:0", "--nats-listen", "off", "--instance-name", "e2e-a")
	run := func(stdin string, args ...string) string {
		t.Helper()
		code, out, stderr := runCLIWith(t, []string{"DELAYQ_SERVER=" + p.HTTPURL}, stdin, args...)
		require.Equal(t, exitOK, code, "%v: %s", args, stderr)
		return out
	}
	tbl := func(args ...string) string {
		t.Helper()
		return run("", append(args, "--output", "table")...)
	}

	kv := keyValues(t, tbl("push", "mail", `{"to": "a@example.com"}`, "--id", "m1", "--key", "k1", "--delay", "1h"))
	require.Equal(t, []string{"m1"}, kv["id"])
	require.Equal(t, []string{"mail"}, kv["topic"])
	require.Equal(t, []string{"scheduled"}, kv["state"])
	run("", "push", "mail", "--id", "a-much-longer-job-id-than-the-others", "--key", "k1", "--delay", "2h")
	run("", "push", "mail", "--id", "m3", "--key", "k2", "--max-attempts", "1")
	run("", "push", "other", "--id", "o1")

	// json is the default, and is the service's answer on one line.
	got := run("", "get", "m1")
	require.Equal(t, got, run("", "get", "m1", "--output", "json"))
	require.Equal(t, 1, strings.Count(got, "\n"), got)
	require.True(t, json.Valid([]byte(got)), got)

	kv = keyValues(t, tbl("get", "m1"))
	require.Equal(t, []string{"k1"}, kv["key"])
	require.Equal(t, []string{"scheduled"}, kv["state"])
	require.Equal(t, []string{"0 of 10"}, kv["attempt"])
	require.Equal(t, []string{`{"to":"a@example.com"}`}, kv["body"])

	rows := table(t, tbl("topics"))
	require.Len(t, rows, 2)
	require.Equal(t, map[string]string{"NAME": "mail", "CONFIGURED": "false", "PAUSED": "false", "SCHEDULED": "2", "READY": "1",
		"RESERVED": "0", "DONE": "0", "DEAD": "0", "CANCELLED": "0"}, rows[0])
	require.Equal(t, "other", rows[1]["NAME"])

	// DELAYQ_OUTPUT sets it too.
	code, out, stderr := runCLIWith(t, []string{"DELAYQ_SERVER=" + p.HTTPURL, "DELAYQ_OUTPUT=table"}, "", "topics", "mail")
	require.Equal(t, exitOK, code, stderr)
	kv = keyValues(t, out)
	require.Equal(t, []string{"mail"}, kv["name"])
	require.Equal(t, []string{"2"}, kv["jobs.scheduled"])
	require.Equal(t, []string{"1"}, kv["jobs.ready"])

	rows = table(t, tbl("find", "mail", "k1"))
	require.Len(t, rows, 2)
	require.Equal(t, "a-much-longer-job-id-than-the-others", rows[0]["ID"])
	require.Equal(t, "m1", rows[1]["ID"])
	require.Equal(t, "scheduled", rows[1]["STATE"])
	out = tbl("find", "mail", "k1", "--limit", "1")
	require.Len(t, table(t, out), 1)
	require.Contains(t, out, "\nnext page: --after a-much-longer-job-id-than-the-others\n")

	kv = keyValues(t, tbl("topic", "put", "mail", `{"max_attempts": 1, "ttr": "45s"}`))
	require.Equal(t, []string{"true"}, kv["configured"])
	require.Equal(t, []string{"1"}, kv["max_attempts"])
	require.Equal(t, []string{"45s"}, kv["ttr"])
	require.Equal(t, []string{"true"}, keyValues(t, tbl("pause", "other"))["paused"])
	require.Equal(t, []string{"false"}, keyValues(t, tbl("resume", "other"))["paused"])

	// claim: a row per delivery, whose lease nacks it; with one attempt,
	// the job goes dead.
	rows = table(t, tbl("claim", "mail", "--max", "10", "--wait", "5s"))
	require.Len(t, rows, 1)
	require.Equal(t, "m3", rows[0]["ID"])
	require.Equal(t, "1", rows[0]["ATTEMPT"])
	require.Equal(t, "null", rows[0]["BODY"])
	run("", "nack", "m3", rows[0]["LEASE"], "--error", "mailbox\tfull")
	rows = table(t, tbl("dead", "mail"))
	require.Len(t, rows, 1)
	require.Equal(t, "m3", rows[0]["ID"])
	require.Equal(t, "dead", rows[0]["STATE"])
	require.Equal(t, "mailbox full", rows[0]["LAST_ERROR"], "a tab in a cell becomes a space")
	require.Empty(t, tbl("claim", "mail"), "no delivery, no header")
	rows = table(t, run("", "get", "--trail", "m3"))
	require.Len(t, rows, 2, "its push and its delivery")
	require.Equal(t, map[string]string{"EVENT": "created", "VIA": "http", "BY": "-", "ATTEMPT": "-", "OUTCOME": "-", "ENDED_AT": "-",
		"ERROR": "-"}, without(rows[0], "AT"))
	require.Equal(t, []string{"delivered", "pull", "1", "buried", "mailbox full"},
		[]string{rows[1]["EVENT"], rows[1]["VIA"], rows[1]["ATTEMPT"], rows[1]["OUTCOME"], rows[1]["ERROR"]})
	require.True(t, strings.HasPrefix(rows[1]["BY"], "e2e-a -> 127.0.0.1:"), "the instance and the consumer: %q", rows[1]["BY"])

	rows = table(t, tbl("cancel", "--key", "k1", "mail"))
	require.ElementsMatch(t, []map[string]string{{"ID": "m1", "RESULT": "cancelled"},
		{"ID": "a-much-longer-job-id-than-the-others", "RESULT": "cancelled"}}, rows)

	kv = keyValues(t, tbl("schedule", "put", "nightly", `{"cron": "30 2 * * *", "time_zone": "Europe/Paris", "topic": "reports"}`, "--next", "2"))
	require.Equal(t, []string{"30 2 * * *"}, kv["cron"])
	require.Len(t, kv["next_run"], 2)
	run("", "schedule", "put", "cleanup", `{"cron": "@every 15m", "topic": "cleanup", "paused": true}`)
	rows = table(t, tbl("schedule", "list"))
	require.Len(t, rows, 2)
	require.Equal(t, "cleanup", rows[0]["NAME"])
	require.Equal(t, "true", rows[0]["PAUSED"])
	require.Equal(t, "nightly", rows[1]["NAME"])
	require.Equal(t, "Europe/Paris", rows[1]["TIME_ZONE"])
	require.Equal(t, kv["next_run"][0], rows[1]["NEXT_RUN"])
	require.Equal(t, []string{"reports"}, keyValues(t, tbl("schedule", "get", "nightly"))["topic"])

	exported := run("", "export")
	kv = keyValues(t, run(exported, "import", "-", "--output", "table"))
	// Every job is there already: each is skipped.
	require.Equal(t, []string{"0"}, kv["imported"])
	require.Equal(t, []string{strconv.Itoa(len(strings.Split(strings.TrimSpace(exported), "\n")))}, kv["skipped"])
	require.Equal(t, []string{"0"}, kv["failed"])

	// subscribe prints a header, then a row per delivery as it comes.
	run("", "push", "live", `{"n": 1}`, "--id", "l1")
	sub := startSubscribe(t, map[string]string{"DELAYQ_SERVER": p.HTTPURL, "DELAYQ_OUTPUT": "table"}, "subscribe", "live")
	sub.stdout.next(t, "LEASE_EXPIRES_AT", 15*time.Second)
	line := sub.stdout.next(t, "l1", 15*time.Second)
	require.True(t, strings.HasSuffix(strings.TrimSpace(line), `{"n":1}`), line)
	require.Equal(t, exitOK, sub.interrupt(t))
}

// without returns row without the column name.
func without(row map[string]string, name string) map[string]string {
	delete(row, name)
	return row
}

// TestCompletionOutput checks that shell completion offers the values of
// --output on client commands, subcommands included.
func TestCompletionOutput(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"topics"}, {"schedule", "list"}, {"claim", "t"}} {
		res := runApp(t, nil, "", append(append([]string{cobra.ShellCompRequestCmd}, args...), "--output", "")...)
		require.Equal(t, exitOK, res.code, res.stderr)
		require.True(t, strings.HasPrefix(res.stdout, "json\ntable\n:"), "%v: %q", args, res.stdout)
	}
}
