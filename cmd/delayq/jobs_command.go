package main

import (
	"context"
	"fmt"
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
	cmd := groupCommand("jobs", "List a topic's jobs by state")
	var (
		flags                   clientFlags
		topicFlag, state, after string
		contains                string
		limit, scan             int
	)
	list := &cobra.Command{
		Use:   "list TOPIC --state STATE",
		Short: "List a topic's jobs in one state, a page at a time",
		Long: `List the jobs of TOPIC in --state (scheduled, ready, reserved, dead, done or
cancelled), each as get shows it now: scheduled and ready by run_at, reserved by
lease expiry, dead by time of death, done and cancelled newest first (in stream
order on the NATS backend). A page of --limit at a time: when there may be more,
the answer ends with "next_after", to pass as --after. With --contains only the
jobs whose body contains the text, among at most --scan jobs read.`,
		Example: `  delayq jobs list orders.close --state ready
  delayq jobs list orders.close --state dead --limit 10 --after <next_after>
  delayq jobs list orders.close --state scheduled --contains '"order": 42'`,
		Args: cobra.MaximumNArgs(1),
		RunE: clientRun(&flags, func(ctx context.Context, c *cliClient, cmd *cobra.Command, args []string) error {
			topic, err := topicArg(cmd, args, topicFlag)
			if err != nil {
				return err
			}
			switch {
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
	list.Flags().StringVar(&topicFlag, "topic", "", "the topic listed")
	// Kept for the scripts written before TOPIC was an argument.
	_ = list.Flags().MarkHidden("topic")
	list.Flags().StringVar(&state, "state", "", "the state listed (required): scheduled, ready, reserved, dead, done or cancelled")
	list.Flags().StringVar(&after, "after", "", "start after this cursor (the next_after of the previous page)")
	list.Flags().IntVar(&limit, "limit", 100, "the most jobs listed, 1 to 1000")
	list.Flags().StringVar(&contains, "contains", "", "only the jobs whose body contains this text")
	list.Flags().IntVar(&scan, "scan", 0, "with --contains, the most jobs read, 1 to 100000 (default: the service's, 10000)")
	addClientFlags(list.Flags(), &flags)
	cmd.AddCommand(list)
	return cmd
}

// topicArg returns the TOPIC argument of a command that took the topic as
// --topic before it was positional, as every other command takes it: the
// flag still works, with a warning on standard error, and giving both is
// a usage error unless they agree.
func topicArg(cmd *cobra.Command, args []string, flag string) (string, error) {
	given := cmd.Flags().Changed("topic")
	if given {
		fmt.Fprintf(cmd.ErrOrStderr(), "delayq: --topic is deprecated: give the topic as the first argument (%s TOPIC)\n", cmd.CommandPath())
	}
	switch {
	case len(args) == 1 && given && flag != args[0]:
		return "", usageErrorf("the topic is %q and --topic %q: give it once, as the argument", args[0], flag)
	case len(args) == 1:
		return args[0], nil
	case given && flag != "":
		return flag, nil
	}
	return "", usageErrorf("the topic is missing: %s TOPIC", cmd.CommandPath())
}
