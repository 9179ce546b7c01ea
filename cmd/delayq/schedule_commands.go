package main

import (
	"context"

	"github.com/spf13/cobra"
)

// scheduleCommand is `delayq schedule put|get|list|delete|run`: recurring
// schedules (docs/api.md, Schedules).
func (a *app) scheduleCommand() *cobra.Command {
	cmd := groupCommand("schedule", "Create, show, list, delete or run recurring schedules (admin)")
	var putFlags, getFlags, listFlags, deleteFlags, runFlags clientFlags
	var next int
	put := &cobra.Command{
		Use:   "put NAME SCHEDULE|-",
		Short: "Create or replace a schedule and print it with its next runs",
		Long: `Create or replace a schedule: SCHEDULE is the JSON body of PUT /v1/schedules/{name}
(docs/api.md), '-' reads it from standard input. It replaces the whole
definition; a change applies from now, and the same definition again
changes nothing.`,
		Example: `  delayq schedule put nightly-report '{"cron": "30 2 * * *", "time_zone": "Europe/Paris",
    "topic": "reports", "job": {"body": {"report": "daily"}}}'
  delayq schedule put cleanup '{"cron": "@every 15m", "topic": "cleanup"}'`,
		Args: cobra.ExactArgs(2),
		RunE: clientRun(&putFlags, func(ctx context.Context, c *cliClient, cmd *cobra.Command, args []string) error {
			body, err := readBody(args[1], cmd.InOrStdin())
			if err != nil {
				return err
			}
			ctx, raw := rawAnswer(ctx)
			sc, err := c.PutScheduleJSON(ctx, args[0], body, next)
			if err != nil {
				return err
			}
			return c.show(cmd.OutOrStdout(), *raw, func(t *tableWriter) { scheduleRows(t, sc) })
		}),
	}
	get := &cobra.Command{
		Use:   "get NAME",
		Short: "Show a schedule, its last slot and its next runs",
		Args:  cobra.ExactArgs(1),
		RunE: clientRun(&getFlags, func(ctx context.Context, c *cliClient, cmd *cobra.Command, args []string) error {
			ctx, raw := rawAnswer(ctx)
			sc, err := c.GetSchedule(ctx, args[0], next)
			if err != nil {
				return err
			}
			return c.show(cmd.OutOrStdout(), *raw, func(t *tableWriter) { scheduleRows(t, sc) })
		}),
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List every schedule with its next runs",
		Args:  cobra.NoArgs,
		RunE: clientRun(&listFlags, func(ctx context.Context, c *cliClient, cmd *cobra.Command, _ []string) error {
			ctx, raw := rawAnswer(ctx)
			all, err := c.ListSchedules(ctx, next)
			if err != nil {
				return err
			}
			return c.show(cmd.OutOrStdout(), *raw, func(t *tableWriter) { scheduleTable(t, all) })
		}),
	}
	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a schedule; the jobs it created stay",
		Args:  cobra.ExactArgs(1),
		RunE: clientRun(&deleteFlags, func(ctx context.Context, c *cliClient, cmd *cobra.Command, args []string) error {
			return c.DeleteSchedule(ctx, args[0])
		}),
	}
	run := &cobra.Command{
		Use:   "run NAME",
		Short: "Push one job of a schedule now, beside its slots",
		Long: `Push one job of the schedule's template now, as push would (a fresh id), and
print it as push does. The schedule's slots are not moved; a paused schedule
runs too.`,
		Args: cobra.ExactArgs(1),
		RunE: clientRun(&runFlags, func(ctx context.Context, c *cliClient, cmd *cobra.Command, args []string) error {
			ctx, raw := rawAnswer(ctx)
			p, err := c.RunSchedule(ctx, args[0])
			if err != nil {
				return err
			}
			return c.show(cmd.OutOrStdout(), *raw, func(t *tableWriter) { pushedRows(t, p) })
		}),
	}
	for _, c := range []struct {
		cmd   *cobra.Command
		flags *clientFlags
	}{{put, &putFlags}, {get, &getFlags}, {list, &listFlags}, {del, &deleteFlags}, {run, &runFlags}} {
		addClientFlags(c.cmd.Flags(), c.flags)
		if c.cmd != del && c.cmd != run {
			c.cmd.Flags().IntVar(&next, "next", 3, "how many next runs to show, 0 to 100")
		}
	}
	cmd.AddCommand(put, get, list, del, run)
	return cmd
}
