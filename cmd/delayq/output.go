package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/delayq/delayq/client"
)

// outputFormat is --output: how a client command prints answers. It is a
// pflag.Value so that a bad value, on the command line or in
// DELAYQ_OUTPUT, is a usage error.
type outputFormat string

// The values of --output.
const (
	// outputJSON prints the service's JSON answer as it came, on one line.
	outputJSON outputFormat = "json"
	// outputTable prints aligned columns for lists, key/value rows for one
	// object.
	outputTable outputFormat = "table"
)

// outputFormats are the values of --output, for checks and completion.
var outputFormats = []string{string(outputJSON), string(outputTable)}

// String returns the format's name.
func (o *outputFormat) String() string { return string(*o) }

// Set accepts json or table.
func (o *outputFormat) Set(s string) error {
	switch f := outputFormat(strings.ToLower(strings.TrimSpace(s))); f {
	case outputJSON, outputTable:
		*o = f
		return nil
	}
	return fmt.Errorf("want json or table")
}

// Type names the flag's value in help.
func (o *outputFormat) Type() string { return "json|table" }

// completeOutput offers the values of --output to shell completion on
// every command that has the flag.
func completeOutput(cmd *cobra.Command) {
	if cmd.Flags().Lookup("output") != nil {
		_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(outputFormats, cobra.ShellCompDirectiveNoFileComp))
	}
	for _, sub := range cmd.Commands() {
		completeOutput(sub)
	}
}

// tableWriter writes --output table: rows of tab-separated cells, aligned
// when flushed.
type tableWriter struct {
	tw *tabwriter.Writer
}

// newTableWriter returns a tableWriter on w, its columns two spaces apart.
func newTableWriter(w io.Writer) *tableWriter {
	return &tableWriter{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
}

// row writes one row. Tabs and line breaks in a cell (a body, an error
// text) become spaces, so that each row stays one line of its columns.
func (t *tableWriter) row(cells ...string) {
	for i, c := range cells {
		if i > 0 {
			_, _ = io.WriteString(t.tw, "\t")
		}
		_, _ = io.WriteString(t.tw, cellReplacer.Replace(c))
	}
	_, _ = io.WriteString(t.tw, "\n")
}

// cellReplacer keeps a cell on one line in one column.
var cellReplacer = strings.NewReplacer("\t", " ", "\r\n", " ", "\n", " ", "\r", " ")

// flush writes the rows, aligned.
func (t *tableWriter) flush() error { return t.tw.Flush() }

// cellTime is a time in a cell: RFC 3339 in UTC to the millisecond, "-"
// when unset.
func cellTime(tm time.Time) string {
	if tm.IsZero() {
		return "-"
	}
	return tm.UTC().Format("2006-01-02T15:04:05.000Z")
}

// cellText is a text in a cell, "-" when empty.
func cellText(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// cellJSON is a JSON value (a job's body) compacted into a cell.
func cellJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "null"
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}

// cellDurations is a list of durations in a cell, "-" when empty.
func cellDurations(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = d.String()
	}
	return strings.Join(s, ",")
}

// itoa is strconv.Itoa for cells.
func itoa(n int) string { return strconv.Itoa(n) }

// jobRows writes a job as key/value rows.
func jobRows(t *tableWriter, j *client.Job) {
	t.row("id", j.ID)
	t.row("topic", j.Topic)
	t.row("key", cellText(j.Key))
	t.row("state", j.State)
	t.row("run_at", cellTime(j.RunAt))
	t.row("attempt", itoa(j.Attempt)+" of "+itoa(j.MaxAttempts))
	t.row("priority", itoa(j.Priority))
	t.row("ttr", j.TTR.String())
	t.row("backoff_delays", cellDurations(j.BackoffDelays))
	t.row("url", cellText(j.URL))
	t.row("expires_at", cellTime(j.ExpiresAt))
	t.row("created_at", cellTime(j.CreatedAt))
	t.row("updated_at", cellTime(j.UpdatedAt))
	t.row("lease_expires_at", cellTime(j.LeaseExpiresAt))
	t.row("last_error", cellText(j.LastError))
	t.row("body", cellJSON(j.Body))
}

// trailTable writes a job's trail (delayq get --trail), one entry a row:
// BY is the token that pushed, or for a delivery the instance that handed
// it out and the consumer it went to.
func trailTable(t *tableWriter, trail []client.TrailEntry) {
	t.row("AT", "EVENT", "VIA", "BY", "ATTEMPT", "OUTCOME", "ENDED_AT", "ERROR")
	for _, e := range trail {
		by, attempt := e.Token, "-"
		if e.Event == client.TrailDelivered {
			by, attempt = cellText(e.Instance)+" -> "+cellText(e.Consumer), itoa(e.Attempt)
		}
		outcome := e.Outcome
		if e.Event == client.TrailDelivered && outcome == "" {
			outcome = "in progress"
		}
		t.row(cellTime(e.At), e.Event, cellText(e.Via), cellText(by), attempt, cellText(outcome), cellTime(e.EndedAt), cellText(e.Error))
	}
}

// jobTable writes jobs (a find's page, a topic's dead jobs) as a table,
// one job a row.
func jobTable(t *tableWriter, jobs []*client.Job) {
	t.row("ID", "STATE", "KEY", "RUN_AT", "ATTEMPT", "UPDATED_AT", "LAST_ERROR")
	for _, j := range jobs {
		t.row(j.ID, j.State, cellText(j.Key), cellTime(j.RunAt), itoa(j.Attempt)+"/"+itoa(j.MaxAttempts),
			cellTime(j.UpdatedAt), cellText(j.LastError))
	}
}

// pushedRows writes the answer of a push.
func pushedRows(t *tableWriter, p *client.Pushed) {
	t.row("id", p.ID)
	t.row("topic", p.Topic)
	t.row("state", p.State)
	t.row("run_at", cellTime(p.RunAt))
	t.row("replaced", strconv.FormatBool(p.Replaced))
}

// cancelledTable writes the answer of a cancel by key: each job and
// whether it was cancelled or left because it is reserved.
func cancelledTable(t *tableWriter, c *client.Cancelled) {
	t.row("ID", "RESULT")
	for _, id := range c.Cancelled {
		t.row(id, "cancelled")
	}
	for _, id := range c.Reserved {
		t.row(id, "reserved, left")
	}
}

// topicTable writes topics, one a row, with their counts per state.
func topicTable(t *tableWriter, topics []*client.Topic) {
	t.row("NAME", "CONFIGURED", "PAUSED", "SCHEDULED", "READY", "RESERVED", "DONE", "DEAD", "CANCELLED")
	for _, tp := range topics {
		n := tp.Counts
		t.row(tp.Name, strconv.FormatBool(tp.Configured), strconv.FormatBool(tp.Paused),
			i64(n.Scheduled), i64(n.Ready), i64(n.Reserved), i64(n.Done), i64(n.Dead), i64(n.Cancelled))
	}
}

// i64 is strconv.FormatInt for cells.
func i64(n int64) string { return strconv.FormatInt(n, 10) }

// topicRows writes one topic as key/value rows: its configuration with
// defaults filled, then its counts.
func topicRows(t *tableWriter, tp *client.Topic) {
	t.row("name", tp.Name)
	t.row("configured", strconv.FormatBool(tp.Configured))
	t.row("paused", strconv.FormatBool(tp.Paused))
	d := tp.Delivery
	t.row("delivery", cellText(d.Type))
	switch d.Type {
	case "webhook":
		t.row("delivery.url", d.URL)
		t.row("delivery.method", cellText(d.Method))
		t.row("delivery.timeout", d.Timeout.String())
		t.row("delivery.secret_set", strconv.FormatBool(d.SecretSet))
	case "nats":
		t.row("delivery.subject", d.Subject)
		t.row("delivery.timeout", d.Timeout.String())
	case "kafka":
		t.row("delivery.kafka_topic", d.KafkaTopic)
		t.row("delivery.timeout", d.Timeout.String())
	}
	t.row("ttr", tp.TTR.String())
	t.row("max_attempts", itoa(tp.MaxAttempts))
	b := tp.Backoff
	if len(b.Delays) > 0 {
		t.row("backoff", "delays "+cellDurations(b.Delays))
	} else {
		t.row("backoff", fmt.Sprintf("initial %s, max %s, factor %g, jitter %g", b.Initial, b.Max, b.Factor, b.Jitter))
	}
	t.row("concurrency", itoa(tp.Concurrency))
	t.row("unique_keys", cellText(tp.UniqueKeys))
	t.row("on_dead", cellText(tp.OnDead))
	events := "-"
	if e := tp.Events; e.Topic != "" {
		on := "all"
		if len(e.On) > 0 {
			on = strings.Join(e.On, ",")
		}
		events = e.Topic + " on " + on
	}
	t.row("events", events)
	if tp.Rate.Limit > 0 {
		perKey := ""
		if tp.Rate.PerKey {
			perKey = ", per key"
		}
		t.row("rate", fmt.Sprintf("%d per %s, burst %d%s", tp.Rate.Limit, tp.Rate.Period, tp.Rate.Burst, perKey))
	} else {
		t.row("rate", "-")
	}
	t.row("max_in_flight", itoa(tp.MaxInFlight))
	t.row("key_concurrency", itoa(tp.KeyConcurrency))
	t.row("fair", strconv.FormatBool(tp.Fair))
	expiresIn := "-"
	if tp.ExpiresIn > 0 {
		expiresIn = tp.ExpiresIn.String()
	}
	t.row("expires_in", expiresIn)
	if tp.Delay > 0 {
		t.row("delay", tp.Delay.String())
	}
	if tp.Retention > 0 {
		t.row("retention", tp.Retention.String())
	}
	n := tp.Counts
	for _, c := range []struct {
		state string
		n     int64
	}{{"scheduled", n.Scheduled}, {"ready", n.Ready}, {"reserved", n.Reserved}, {"done", n.Done}, {"dead", n.Dead}, {"cancelled", n.Cancelled}} {
		t.row("jobs."+c.state, i64(c.n))
	}
}

// scheduleTable writes schedules, one a row, with their next run.
func scheduleTable(t *tableWriter, schedules []*client.Schedule) {
	t.row("NAME", "CRON", "TIME_ZONE", "TOPIC", "PAUSED", "LAST_SLOT", "NEXT_RUN")
	for _, s := range schedules {
		next := "-"
		if len(s.NextRuns) > 0 {
			next = cellTime(s.NextRuns[0])
		}
		t.row(s.Name, s.Cron, cellText(s.TimeZone), s.Topic, strconv.FormatBool(s.Paused), cellTime(s.LastSlot), next)
	}
}

// scheduleRows writes one schedule as key/value rows, a row for each of
// its next runs.
func scheduleRows(t *tableWriter, s *client.Schedule) {
	t.row("name", s.Name)
	t.row("cron", s.Cron)
	t.row("time_zone", cellText(s.TimeZone))
	t.row("topic", s.Topic)
	t.row("paused", strconv.FormatBool(s.Paused))
	t.row("missed", cellText(s.Missed))
	t.row("start", cellTime(s.Start))
	t.row("end", cellTime(s.End))
	body, _ := s.Job.Body.(json.RawMessage)
	t.row("job.body", cellJSON(body))
	t.row("job.key", cellText(s.Job.Key))
	t.row("created_at", cellTime(s.CreatedAt))
	t.row("updated_at", cellTime(s.UpdatedAt))
	t.row("last_slot", cellTime(s.LastSlot))
	for _, r := range s.NextRuns {
		t.row("next_run", cellTime(r))
	}
}

// deliveryHeader and deliveryRow write claimed or subscribed deliveries,
// one a row; the lease is what ack and nack take.
func deliveryHeader(t *tableWriter) {
	t.row("ID", "ATTEMPT", "RUN_AT", "LEASE_EXPIRES_AT", "LEASE", "BODY")
}

// deliveryRow writes one delivery under deliveryHeader.
func deliveryRow(t *tableWriter, d *deliveryLine) {
	t.row(d.ID, itoa(d.Attempt), d.RunAt, d.LeaseExpiresAt, d.Lease, cellJSON(d.Body))
}
