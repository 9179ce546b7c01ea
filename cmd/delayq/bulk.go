package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/delayq/delayq/client"
	"github.com/delayq/delayq/transports/wire"
)

// bulkFlags are the filter flags of the commands that act on a topic's
// jobs by filter (`requeue --all|--error-contains TOPIC`, `cancel --all
// TOPIC` and the like).
type bulkFlags struct {
	contains, since, until, state string
	limit                         int
	dryRun                        bool
}

// add declares the flags on fs; state only for a command that takes it.
func (b *bulkFlags) add(fs *pflag.FlagSet, what string, state bool) {
	fs.StringVar(&b.since, "since", "", "only the jobs whose "+what+" is at or after this time: RFC 3339, or Unix seconds")
	fs.StringVar(&b.until, "until", "", "only the jobs whose "+what+" is before this time: RFC 3339, or Unix seconds")
	fs.IntVar(&b.limit, "limit", 0, "the most jobs changed; 0: no bound")
	fs.BoolVar(&b.dryRun, "dry-run", false, "count the jobs the filter matches and change none")
	if state {
		fs.StringVar(&b.state, "state", "", "only the jobs in this state: scheduled or ready")
	}
}

// used reports whether a flag of the filter (other than --error-contains
// and --key, which the commands also use otherwise) was given.
func (b *bulkFlags) used(fs *pflag.FlagSet) bool {
	for _, name := range []string{"since", "until", "limit", "dry-run", "state"} {
		if fs.Changed(name) {
			return true
		}
	}
	return false
}

// filter returns the filter of the flags and key. Errors: a usage error
// for a bad time or a negative limit.
func (b *bulkFlags) filter(key string) (*client.JobFilter, error) {
	f := &client.JobFilter{ErrorContains: b.contains, Key: key, State: client.State(b.state), Limit: b.limit, DryRun: b.dryRun}
	if b.limit < 0 {
		return nil, usageErrorf("--limit must not be negative (0: no bound)")
	}
	var err error
	if f.Since, err = flagTime("since", b.since); err != nil {
		return nil, err
	}
	if f.Until, err = flagTime("until", b.until); err != nil {
		return nil, err
	}
	return f, nil
}

// flagTime parses the time text of the flag --name; "" is the zero time.
func flagTime(name, text string) (time.Time, error) {
	if text == "" {
		return time.Time{}, nil
	}
	t, err := wire.ParseTimeText(name, text)
	if err != nil {
		return time.Time{}, usageErrorf("invalid --%s %q: want RFC 3339 such as 2030-01-01T10:00:00.250Z, or Unix seconds such as 1893492000.25", name, text)
	}
	return t, nil
}

// runBulk calls op with f until the service has gone through the topic's
// jobs (a request stops after a while and answers where to go on), and
// prints the sum: {"count", "dry_run", "sample"}, the sample the first
// answer's jobs up to 10. Failing midway, it says on errw how many jobs
// were changed before the error it returns.
func (c *cliClient) runBulk(ctx context.Context, out, errw io.Writer, f *client.JobFilter, op func(context.Context, *client.JobFilter) (*client.BulkResult, error)) error {
	sum := client.BulkResult{DryRun: f.DryRun, Sample: []*client.Job{}}
	limit := f.Limit
	for {
		res, err := op(ctx, f)
		if err != nil {
			if sum.Count > 0 {
				fmt.Fprintf(errw, "%d jobs were changed before the error\n", sum.Count)
			}
			return err
		}
		sum.Count += res.Count
		sum.Sample = append(sum.Sample, res.Sample[:min(len(res.Sample), 10-len(sum.Sample))]...)
		if res.NextAfter == "" || (limit > 0 && sum.Count >= limit) {
			break
		}
		f.After = res.NextAfter
		if limit > 0 {
			f.Limit = limit - sum.Count
		}
	}
	raw, err := json.Marshal(sum)
	if err != nil {
		return err
	}
	return c.show(out, raw, func(t *tableWriter) {
		t.row("count", strconv.Itoa(sum.Count))
		t.row("dry_run", strconv.FormatBool(sum.DryRun))
	})
}
