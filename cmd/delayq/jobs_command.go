package main

import (
	"context"
	"slices"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/delayq/delayq/client"
)

// listStates are the states `delayq jobs list --state` takes.
var listStates = []string{client.StateScheduled, client.StateReady, client.StateReserved,
	client.StateDead, client.StateDone, client.StateCancelled}

// jobsCommand is `delayq jobs list`.
func (a *app) jobsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "List a topic's jobs by state",
	}
	var (
		flags               clientFlags
		topic, state, after string
		contains            string
		limit, scan         int
	)
	list := &cobra.Command{
		Use:   "list --topic TOPIC --state STATE",
		Short: "List a topic's jobs in one state, a page at a time",
		Long: `List the jobs of --topic in --state (scheduled, ready, reserved, dead, done or
cancelled), each as get shows it now: scheduled and ready by run_at, reserved by
lease expiry, dead by time of death, done and cancelled newest first (in stream
order on the NATS backend). A page of --limit at a time: when there may be more,
the answer ends with "next_after", to pass as --after. With --contains only the
jobs whose body contains the text, among at most --scan jobs read.`,
		Example: `  delayq jobs list --topic orders.close --state ready
  delayq jobs list --topic orders.close --state dead --limit 10 --after <next_after>
  delayq jobs list --topic orders.close --state scheduled --contains '"order": 42'`,
		Args: cobra.NoArgs,
		RunE: clientRun(&flags, func(ctx context.Context, c *cliClient, cmd *cobra.Command, _ []string) error {
			switch {
			case topic == "":
				return usageErrorf("--topic is required")
			case !slices.Contains(listStates, state):
				return usageErrorf("invalid --state %q: want one of scheduled, ready, reserved, dead, done, cancelled", state)
			case scan != 0 && contains == "":
				return usageErrorf("--scan needs --contains")
			case scan < 0 || scan > 100_000:
				return usageErrorf("invalid --scan %d: want 1 to 100000", scan)
			}
			if err := checkLimit(limit); err != nil {
				return err
			}
			ctx, raw := rawAnswer(ctx)
			page, err := c.ListJobs(ctx, &client.ListJobsParams{Topic: topic, State: client.State(state),
				After: after, Limit: limit, Contains: contains, Scan: scan})
			if err != nil {
				return err
			}
			return c.show(cmd.OutOrStdout(), *raw, func(t *tableWriter) {
				jobTable(t, page.Jobs)
				if contains != "" {
					t.row("")
					t.row("scanned: " + strconv.Itoa(page.Scanned))
				}
				if page.NextAfter != "" {
					t.row("")
					t.row("next page: --after " + page.NextAfter)
				}
			})
		}),
	}
	list.Flags().StringVar(&topic, "topic", "", "the topic listed (required)")
	list.Flags().StringVar(&state, "state", "", "the state listed (required): scheduled, ready, reserved, dead, done or cancelled")
	list.Flags().StringVar(&after, "after", "", "start after this cursor (the next_after of the previous page)")
	list.Flags().IntVar(&limit, "limit", 100, "the most jobs listed, 1 to 1000")
	list.Flags().StringVar(&contains, "contains", "", "only the jobs whose body contains this text")
	list.Flags().IntVar(&scan, "scan", 0, "with --contains, the most jobs read, 1 to 100000 (default: the service's, 10000)")
	addClientFlags(list.Flags(), &flags)
	cmd.AddCommand(list)
	return cmd
}
