package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/delayq/delayq/client"
	"github.com/delayq/delayq/core"
	"github.com/delayq/delayq/transports/wire"
)

// pushCommand is `delayq push TOPIC [BODY|-]`.
func (a *app) pushCommand() *cobra.Command {
	var (
		flags                              clientFlags
		delay, runAt, ttr, expiresIn, then string
		retryDelays                        []string
		req                                client.PushParams
	)
	cmd := &cobra.Command{
		Use:   "push TOPIC [BODY|-]",
		Short: "Push a job to a topic",
		Long: `Push a job to a topic and print the answer: its id, topic, run_at and state.

BODY is a JSON value ('{"order": 42}', '"text"', 7); '-' reads it from standard
input; without BODY the job's body is null. --delay and --run-at are exclusive;
with neither the job is due now. With --expires-in, a job not delivered and
acknowledged that long after its run_at goes dead with last_error "expired".
With --then, the job's next step, a job object as POST /v1/jobs takes it
(without id, possibly with a then of its own), is pushed once the job is
acknowledged, its delay counted from the ack.`,
		Example: `  delayq push orders.close '{"order": 42}' --delay 15m
  echo '{"order": 42}' | delayq push orders.close - --run-at 2030-01-01T10:00:00Z
  delayq push orders.placed '{"order": 42}' --then '{"topic": "orders.remind", "delay": "30m", "key": "order-42"}'`,
		Args: cobra.RangeArgs(1, 2),
		RunE: clientRun(&flags, func(ctx context.Context, c *cliClient, cmd *cobra.Command, args []string) error {
			req.Topic = args[0]
			if len(args) == 2 {
				body, err := readBody(args[1], cmd.InOrStdin())
				if err != nil {
					return err
				}
				req.Body = body
			}
			if delay != "" && runAt != "" {
				return usageErrorf("--delay and --run-at are exclusive")
			}
			if delay != "" {
				d, err := flagDuration("delay", delay)
				if err != nil {
					return err
				}
				req.Delay = d
			}
			if runAt != "" {
				t, err := wire.ParseTimeText("run_at", runAt)
				if err != nil {
					return usageErrorf("invalid --run-at %q: want RFC 3339 such as 2030-01-01T10:00:00.250Z, or Unix seconds such as 1893492000.25", runAt)
				}
				req.RunAt = t
			}
			if ttr != "" {
				d, err := flagDuration("ttr", ttr)
				if err != nil {
					return err
				}
				if d <= 0 {
					// 0 would be left out, and so take the topic's ttr.
					return usageErrorf("invalid --ttr %q: want a positive duration such as 30s", ttr)
				}
				req.TTR = d
			}
			if expiresIn != "" {
				d, err := flagDuration("expires-in", expiresIn)
				if err != nil {
					return err
				}
				if d <= 0 {
					// 0 would be left out, and so take the topic's expires_in.
					return usageErrorf("invalid --expires-in %q: want a positive duration such as 10m", expiresIn)
				}
				req.ExpiresIn = d
			}
			req.Then = nil
			if then != "" {
				req.Then = new(client.PushParams)
				if err := json.Unmarshal([]byte(then), req.Then); err != nil {
					return usageErrorf("invalid --then: want a job object such as '{\"topic\": \"orders.remind\", \"delay\": \"30m\"}': %v", err)
				}
			}
			req.BackoffDelays = nil
			for _, s := range retryDelays {
				d, err := flagDuration("backoff-delays", s)
				if err != nil {
					return err
				}
				req.BackoffDelays = append(req.BackoffDelays, d)
			}
			ctx, raw := rawAnswer(ctx)
			p, err := c.Push(ctx, &req)
			if err != nil {
				return err
			}
			return c.show(cmd.OutOrStdout(), *raw, func(t *tableWriter) { pushedRows(t, p) })
		}),
	}
	fs := cmd.Flags()
	addClientFlags(fs, &flags)
	fs.StringVar(&delay, "delay", "", "deliver after this long: a duration with its unit (15m, 1500ms)")
	fs.StringVar(&runAt, "run-at", "", "deliver at this time: RFC 3339, or Unix seconds")
	fs.StringVar(&req.ID, "id", "", "the job's id (default: a new one)")
	fs.StringVar(&ttr, "ttr", "", "time to run: how long a consumer holds a delivery (default: the topic's)")
	fs.IntVar(&req.MaxAttempts, "max-attempts", 0, "most deliveries before the job goes dead (default: the topic's)")
	fs.StringVar(&req.Key, "key", "", "business key")
	fs.IntVar(&req.Priority, "priority", 0, "among jobs due together, lower goes first: -10 (most urgent) to 10")
	fs.StringVar(&req.URL, "url", "", "the job's own webhook URL, for a webhook topic with delivery.allow_job_url (default: the topic's)")
	fs.StringVar(&expiresIn, "expires-in", "", "expire the job this long after its run_at unless delivered and acknowledged by then (default: the topic's expires_in)")
	fs.StringSliceVar(&retryDelays, "backoff-delays", nil, "the job's own retry schedule, the last repeated: 1m,3m,5m (default: the topic's backoff)")
	fs.StringVar(&then, "then", "", "the job's next step, pushed once it is acknowledged: a job object in JSON, without id")
	return cmd
}

// readBody returns the JSON body of push: arg itself, or standard input for
// "-". Anything but one JSON value is a usage error.
func readBody(arg string, stdin io.Reader) (json.RawMessage, error) {
	body := []byte(arg)
	if arg == "-" {
		var err error
		if body, err = io.ReadAll(stdin); err != nil {
			return nil, fmt.Errorf("reading the body from standard input: %w", err)
		}
	}
	if !json.Valid(body) {
		return nil, usageErrorf("BODY must be one JSON value; quote text as JSON, such as '\"hello\"'")
	}
	return json.RawMessage(body), nil
}

// flagDuration is parseFlagDuration of the string flag name, a usage
// error naming the flag when malformed. The server checks the range.
func flagDuration(name, s string) (time.Duration, error) {
	d, err := parseFlagDuration(s)
	if err != nil {
		return 0, usageErrorf("invalid --%s %q: %v", name, s, err)
	}
	return d, nil
}

// getCommand is `delayq get [--trail] ID`.
func (a *app) getCommand() *cobra.Command {
	var flags clientFlags
	var trail bool
	cmd := &cobra.Command{
		Use:   "get [--trail] ID",
		Short: "Print a job: its fields, state and attempts, or its trail",
		Long: `Print a job as GET /v1/jobs/{id} answers it (its trail included), or with
--output table its fields as rows. With --trail, print its trail as a table
instead, whatever --output says: one row per step, oldest first, its last 50
(created and how, replaced, each delivery with the instance that handed it
out, the consumer's address and the outcome, requeued, cancelled, expired).`,
		Example: `  delayq get 01JD6Y3TQ9V9ZK0M4XJ3R2B7QF
  delayq get --trail 01JD6Y3TQ9V9ZK0M4XJ3R2B7QF`,
		Args: cobra.ExactArgs(1),
		RunE: clientRun(&flags, func(ctx context.Context, c *cliClient, cmd *cobra.Command, args []string) error {
			ctx, raw := rawAnswer(ctx)
			j, err := c.Get(ctx, args[0])
			if err != nil {
				return err
			}
			if trail {
				t := newTableWriter(cmd.OutOrStdout())
				trailTable(t, j.Trail)
				return t.flush()
			}
			return c.show(cmd.OutOrStdout(), *raw, func(t *tableWriter) { jobRows(t, j) })
		}),
	}
	cmd.Flags().BoolVar(&trail, "trail", false, "print the job's trail as a table")
	addClientFlags(cmd.Flags(), &flags)
	return cmd
}

// cancelCommand is `delayq cancel [--running] ID`, `delayq cancel --key KEY
// TOPIC`, or `delayq cancel --all TOPIC` and the filter flags.
func (a *app) cancelCommand() *cobra.Command {
	var flags clientFlags
	var bulk bulkFlags
	var key string
	var running, all bool
	cmd := &cobra.Command{
		Use:   "cancel [--running] ID | cancel --key KEY TOPIC | cancel --all TOPIC",
		Short: "Cancel a job, or a topic's jobs by business key or filter, that are not being delivered",
		Long: `Cancel a job that is scheduled, ready or dead; it prints nothing on success.
With --running, cancel it while it is being delivered too: the delivery ends,
and its consumer's ack or nack is refused. With --key alone, cancel every such
job of TOPIC with that business key, and print the ids cancelled and those left
because they are being delivered.

With --all or a filter flag (--state, --error-contains, --since and --until on
run_at, --limit, --dry-run; --key then narrows the filter), cancel the
scheduled and ready jobs of TOPIC that match (POST /v1/topics/{topic}/jobs/cancel,
repeated while the service says there is more), and print
{"count": N, "dry_run": false, "sample": [up to 10 jobs]}.`,
		Example: `  delayq cancel 01JD6Y3TQ9V9ZK0M4XJ3R2B7QF
  delayq cancel --running 01JD6Y3TQ9V9ZK0M4XJ3R2B7QF
  delayq cancel --key order-42 orders.close
  delayq cancel --state scheduled --until 2030-01-01T00:00:00Z --dry-run orders.close`,
		Args: cobra.ExactArgs(1),
		RunE: clientRun(&flags, func(ctx context.Context, c *cliClient, cmd *cobra.Command, args []string) error {
			fs := cmd.Flags()
			filtered := all || bulk.used(fs) || fs.Changed("error-contains")
			switch {
			case running && (filtered || fs.Changed("key")):
				return usageErrorf("--running cancels one job: it goes with neither --key, --all nor a filter flag")
			case running:
				return c.CancelRunning(ctx, args[0])
			case filtered:
				f, err := bulk.filter(key)
				if err != nil {
					return err
				}
				return c.runBulk(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), f, func(ctx context.Context, f *client.JobFilter) (*client.BulkResult, error) {
					return c.CancelJobs(ctx, args[0], f)
				})
			case !fs.Changed("key"):
				return c.Cancel(ctx, args[0])
			}
			ctx, raw := rawAnswer(ctx)
			res, err := c.CancelByKey(ctx, args[0], key)
			if err != nil {
				return err
			}
			return c.show(cmd.OutOrStdout(), *raw, func(t *tableWriter) { cancelledTable(t, res) })
		}),
	}
	cmd.Flags().StringVar(&key, "key", "", "cancel the jobs of the topic TOPIC with this business key")
	cmd.Flags().BoolVar(&running, "running", false, "cancel the job while it is being delivered too, ending its delivery")
	cmd.Flags().BoolVar(&all, "all", false, "cancel every scheduled and ready job of the topic TOPIC (the filter flags narrow it)")
	cmd.Flags().StringVar(&bulk.contains, "error-contains", "", "only the jobs whose last error contains this text")
	bulk.add(cmd.Flags(), "run_at", true)
	addClientFlags(cmd.Flags(), &flags)
	return cmd
}

// findCommand is `delayq find TOPIC KEY`.
func (a *app) findCommand() *cobra.Command {
	var flags clientFlags
	var after string
	var limit int
	cmd := &cobra.Command{
		Use:   "find TOPIC KEY",
		Short: "List a topic's jobs with a business key",
		Long: `List the jobs of TOPIC with business key KEY, in every state (finished ones
while they are kept), in id order, a page of --limit at a time. A full page
ends with "next_after": pass it as --after for the next page.`,
		Example: `  delayq find orders.close order-42
  delayq find orders.close order-42 --limit 10 --after 01JD6Y3TQ9V9ZK0M4XJ3R2B7QF`,
		Args: cobra.ExactArgs(2),
		RunE: clientRun(&flags, func(ctx context.Context, c *cliClient, cmd *cobra.Command, args []string) error {
			if err := checkLimit(limit); err != nil {
				return err
			}
			ctx, raw := rawAnswer(ctx)
			page, err := c.FindByKey(ctx, &client.FindByKeyParams{Topic: args[0], Key: args[1], After: after, Limit: limit})
			if err != nil {
				return err
			}
			return c.show(cmd.OutOrStdout(), *raw, func(t *tableWriter) {
				jobTable(t, page.Jobs)
				if page.NextAfter != "" {
					t.row("")
					t.row("next page: --after " + page.NextAfter)
				}
			})
		}),
	}
	cmd.Flags().StringVar(&after, "after", "", "start after this job id (the next_after of the previous page)")
	cmd.Flags().IntVar(&limit, "limit", 100, "the most jobs listed, 1 to 1000")
	addClientFlags(cmd.Flags(), &flags)
	return cmd
}

// topicsCommand is `delayq topics [TOPIC]`.
func (a *app) topicsCommand() *cobra.Command {
	var flags clientFlags
	cmd := &cobra.Command{
		Use:   "topics [TOPIC]",
		Short: "List topics with their job counts, or show one topic",
		Args:  cobra.MaximumNArgs(1),
		RunE: clientRun(&flags, func(ctx context.Context, c *cliClient, cmd *cobra.Command, args []string) error {
			ctx, raw := rawAnswer(ctx)
			if len(args) == 1 {
				tp, err := c.GetTopic(ctx, args[0])
				if err != nil {
					return err
				}
				return c.show(cmd.OutOrStdout(), *raw, func(t *tableWriter) { topicRows(t, tp) })
			}
			topics, err := c.ListTopics(ctx)
			if err != nil {
				return err
			}
			return c.show(cmd.OutOrStdout(), *raw, func(t *tableWriter) { topicTable(t, topics) })
		}),
	}
	addClientFlags(cmd.Flags(), &flags)
	return cmd
}

// topicCommand is `delayq topic put TOPIC CONFIG` and `delayq topic
// delete TOPIC`: a topic's configuration (`delayq topics TOPIC` shows it).
func (a *app) topicCommand() *cobra.Command {
	cmd := groupCommand("topic", "Set or delete a topic's configuration (admin)")
	var putFlags, deleteFlags clientFlags
	put := &cobra.Command{
		Use:   "put TOPIC CONFIG|-",
		Short: "Set a topic's configuration and print the topic",
		Long: `Set a topic's configuration: CONFIG is the JSON body of PUT /v1/topics/{topic}
(docs/api.md), '-' reads it from standard input. It replaces the whole
configuration; fields left out take their defaults.`,
		Example: `  delayq topic put orders.close '{"max_attempts": 5, "rate": {"limit": 100}}'
  delayq topic put orders.close - < orders.close.json`,
		Args: cobra.ExactArgs(2),
		RunE: clientRun(&putFlags, func(ctx context.Context, c *cliClient, cmd *cobra.Command, args []string) error {
			config, err := readBody(args[1], cmd.InOrStdin())
			if err != nil {
				return err
			}
			ctx, raw := rawAnswer(ctx)
			tp, err := c.PutTopicJSON(ctx, args[0], config)
			if err != nil {
				return err
			}
			return c.show(cmd.OutOrStdout(), *raw, func(t *tableWriter) { topicRows(t, tp) })
		}),
	}
	addClientFlags(put.Flags(), &putFlags)
	set := a.topicSetCommand()
	del := &cobra.Command{
		Use:   "delete TOPIC",
		Short: "Delete a topic's configuration; its jobs stay and take the defaults",
		Args:  cobra.ExactArgs(1),
		RunE: clientRun(&deleteFlags, func(ctx context.Context, c *cliClient, cmd *cobra.Command, args []string) error {
			return c.DeleteTopic(ctx, args[0])
		}),
	}
	addClientFlags(del.Flags(), &deleteFlags)
	cmd.AddCommand(put, set, del)
	return cmd
}

// topicSetCommand is `delayq topic set TOPIC [PATCH|-] [--max-attempts N
// ...]`: some settings of a topic changed, the others kept.
func (a *app) topicSetCommand() *cobra.Command {
	var flags clientFlags
	var ttr, timeout, delay, retention time.Duration
	var maxAttempts, concurrency, maxInFlight, keyConcurrency, rateLimit int
	var onDead, url, kafkaTopic, eventsTopic string
	var eventsOn []string
	var fair, ratePerKey bool
	cmd := &cobra.Command{
		Use:   "set TOPIC [PATCH|-]",
		Short: "Change some settings of a topic's configuration, keep the others, and print the topic",
		Long: `Change some settings of a topic's configuration and keep the others, secrets and
headers included: the flags name the common settings; PATCH, a JSON merge patch of the body
of PUT /v1/topics/{topic} (docs/api.md), any of them ('-' reads it from standard input), with
null for a setting to drop (its default again). The flags apply over PATCH.`,
		Example: `  delayq topic set orders.close --max-attempts 5
  delayq topic set orders.close --ttr 2m --webhook-timeout 5s
  delayq topic set orders.close --retention 720h
  delayq topic set orders.close --key-concurrency 1
  delayq topic set orders.close --fair
  delayq topic set orders.close --rate-limit 10 --rate-per-key
  delayq topic set orders.close --kafka-topic orders-due
  delayq topic set orders.close --events-topic orders.audit --events-on done,dead
  delayq topic set orders.close '{"rate": null, "on_dead": "orders.dead"}'`,
		Args: cobra.RangeArgs(1, 2),
		RunE: clientRun(&flags, func(ctx context.Context, c *cliClient, cmd *cobra.Command, args []string) error {
			patch := map[string]any{}
			if len(args) == 2 {
				body, err := readBody(args[1], cmd.InOrStdin())
				if err != nil {
					return err
				}
				if err := json.Unmarshal(body, &patch); err != nil || patch == nil {
					return errors.New("PATCH: want one JSON object, a merge patch of the topic's configuration")
				}
			}
			changed := cmd.Flags().Changed
			set := func(flag, key string, v any) {
				if changed(flag) {
					patch[key] = v
				}
			}
			set("ttr", "ttr", ttr.String())
			set("max-attempts", "max_attempts", maxAttempts)
			set("concurrency", "concurrency", concurrency)
			set("max-in-flight", "max_in_flight", maxInFlight)
			set("key-concurrency", "key_concurrency", keyConcurrency)
			set("fair", "fair", fair)
			set("on-dead", "on_dead", onDead)
			set("delay", "delay", delay.String())
			set("retention", "retention", retention.String())
			if changed("rate-limit") {
				patch["rate"] = map[string]any{"limit": rateLimit}
				if rateLimit == 0 {
					patch["rate"] = nil // no limit: its period, burst and per_key go too
				}
			}
			if r, given := patch["rate"]; changed("rate-per-key") && (!given || r != nil) {
				r, _ := r.(map[string]any)
				if r == nil {
					r = map[string]any{}
				}
				r["per_key"] = ratePerKey
				patch["rate"] = r
			}
			switch {
			case changed("events-topic") && eventsTopic == "":
				patch["events"] = nil // no events: their transitions go too
			case changed("events-topic") || changed("events-on"):
				e, _ := patch["events"].(map[string]any)
				if e == nil {
					e = map[string]any{}
				}
				if changed("events-topic") {
					e["topic"] = eventsTopic
				}
				if changed("events-on") {
					e["on"] = eventsOn
				}
				patch["events"] = e
			}
			if changed("webhook-url") && changed("kafka-topic") {
				return errors.New("--webhook-url and --kafka-topic: a topic has one delivery")
			}
			if changed("webhook-url") || changed("webhook-timeout") || changed("kafka-topic") {
				d, _ := patch["delivery"].(map[string]any)
				if d == nil {
					d = map[string]any{}
				}
				if changed("webhook-url") {
					d["type"], d["url"] = "webhook", url
				}
				if changed("kafka-topic") {
					d["type"], d["kafka_topic"] = "kafka", kafkaTopic
				}
				if changed("webhook-timeout") {
					d["timeout"] = timeout.String()
				}
				patch["delivery"] = d
			}
			if len(patch) == 0 {
				return errors.New("nothing to change: give a flag (--max-attempts, --ttr...) or a PATCH")
			}
			body, err := json.Marshal(patch)
			if err != nil {
				return err
			}
			ctx, raw := rawAnswer(ctx)
			tp, err := c.PatchTopicJSON(ctx, args[0], body)
			if err != nil {
				return err
			}
			return c.show(cmd.OutOrStdout(), *raw, func(t *tableWriter) { topicRows(t, tp) })
		}),
	}
	fs := cmd.Flags()
	fs.Var(&positiveDurationValue{p: &ttr}, "ttr", "how long a consumer holds a delivery before it is handed out again")
	fs.IntVar(&maxAttempts, "max-attempts", 0, "deliveries before a job goes dead")
	fs.IntVar(&concurrency, "concurrency", 0, "webhook or NATS deliveries at once, per instance")
	fs.IntVar(&maxInFlight, "max-in-flight", 0, "jobs reserved at once over every instance (0: no bound)")
	fs.IntVar(&keyConcurrency, "key-concurrency", 0, "jobs of one key reserved at once over every instance, 1 to send a key's jobs one at a time (0: no bound)")
	fs.BoolVar(&fair, "fair", false, "claims take due jobs round-robin across keys, one of each key in turn (--fair=false: in claim order)")
	fs.IntVar(&rateLimit, "rate-limit", 0, "deliveries per second (0: no limit)")
	fs.BoolVar(&ratePerKey, "rate-per-key", false, "the rate limit applies to each key on its own, jobs without a key sharing one (--rate-per-key=false: to the topic as a whole)")
	fs.StringVar(&onDead, "on-dead", "", "the dead-letter topic (empty: none)")
	fs.StringVar(&eventsTopic, "events-topic", "", "the topic that gets an event job for each of this topic's jobs that finishes (empty: none)")
	fs.StringSliceVar(&eventsOn, "events-on", nil, "the transitions told to --events-topic, of done, cancelled, dead, expired (empty: all)")
	fs.Var(&durationValue{p: &delay}, "delay", "the delay of pushes that give neither a delay nor a run_at (0: none)")
	fs.Var(&durationValue{p: &retention}, "retention", "how long jobs pushed from now on are kept once done or cancelled, in whole seconds (0: the server's --retention)")
	fs.StringVar(&url, "webhook-url", "", "deliver by webhook to this URL")
	fs.Var(&positiveDurationValue{p: &timeout}, "webhook-timeout", "how long one webhook delivery may take")
	fs.StringVar(&kafkaTopic, "kafka-topic", "", "deliver to Kafka: produce each due job as a record to this Kafka topic (a server with --kafka-brokers)")
	addClientFlags(fs, &flags)
	return cmd
}

// deadCommand is `delayq dead TOPIC`.
func (a *app) deadCommand() *cobra.Command {
	var flags clientFlags
	var limit int
	cmd := &cobra.Command{
		Use:   "dead TOPIC",
		Short: "List a topic's dead jobs, oldest death first (admin)",
		Args:  cobra.ExactArgs(1),
		RunE: clientRun(&flags, func(ctx context.Context, c *cliClient, cmd *cobra.Command, args []string) error {
			if err := checkLimit(limit); err != nil {
				return err
			}
			ctx, raw := rawAnswer(ctx)
			jobs, err := c.ListDead(ctx, args[0], limit)
			if err != nil {
				return err
			}
			return c.show(cmd.OutOrStdout(), *raw, func(t *tableWriter) { jobTable(t, jobs) })
		}),
	}
	cmd.Flags().IntVar(&limit, "limit", 100, "the most jobs listed, 1 to 1000")
	addClientFlags(cmd.Flags(), &flags)
	return cmd
}

// requeueCommand is `delayq requeue ID`, or `delayq requeue --all TOPIC`
// and `delayq requeue --error-contains TEXT TOPIC` with the filter flags:
// beanstalkd's kick.
func (a *app) requeueCommand() *cobra.Command {
	var (
		flags clientFlags
		bulk  bulkFlags
		all   bool
		key   string
	)
	cmd := &cobra.Command{
		Use:   "requeue ID | requeue --all TOPIC | requeue --error-contains TEXT TOPIC",
		Short: "Make dead jobs ready again, with a fresh attempt count (admin)",
		Long: `Make a dead job ready now with attempt 0; its last error stays. It prints
nothing on success.

With --all, requeue every dead job of TOPIC; with --error-contains, those whose
last error contains TEXT; --key, --since and --until (the time of death) and
--limit narrow either, and --dry-run only counts (POST
/v1/topics/{topic}/dead/requeue, repeated while the service says there is
more). It prints {"count": N, "dry_run": false, "sample": [up to 10 jobs]}.`,
		Example: `  delayq requeue 01JD6Y3TQ9V9ZK0M4XJ3R2B7QF
  delayq requeue --all orders.close
  delayq requeue --error-contains "503" --since 2030-01-01T00:00:00Z --dry-run orders.close`,
		Args: cobra.ExactArgs(1),
		RunE: clientRun(&flags, func(ctx context.Context, c *cliClient, cmd *cobra.Command, args []string) error {
			fs := cmd.Flags()
			byFilter := all || fs.Changed("error-contains")
			switch {
			case all && fs.Changed("error-contains"):
				return usageErrorf("--all and --error-contains are exclusive")
			case fs.Changed("error-contains") && bulk.contains == "":
				return usageErrorf("--error-contains needs a text; --all requeues every dead job")
			case !byFilter && (bulk.used(fs) || fs.Changed("key")):
				return usageErrorf("--key, --since, --until, --limit and --dry-run go with --all or --error-contains TEXT")
			case !byFilter:
				return c.Requeue(ctx, args[0])
			}
			f, err := bulk.filter(key)
			if err != nil {
				return err
			}
			return c.runBulk(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), f, func(ctx context.Context, f *client.JobFilter) (*client.BulkResult, error) {
				return c.RequeueDead(ctx, args[0], f)
			})
		}),
	}
	cmd.Flags().BoolVar(&all, "all", false, "requeue every dead job of the topic TOPIC")
	cmd.Flags().StringVar(&bulk.contains, "error-contains", "", "requeue the dead jobs of the topic TOPIC whose last error contains this text")
	cmd.Flags().StringVar(&key, "key", "", "only the jobs with this business key")
	bulk.add(cmd.Flags(), "time of death", false)
	addClientFlags(cmd.Flags(), &flags)
	return cmd
}

// apiMessage is an error answer's message, or the error's text when it is
// not an answer.
func apiMessage(err error) string {
	if ae, ok := errors.AsType[*client.APIError](err); ok {
		return ae.Message
	}
	return err.Error()
}

// pauseCommand is `delayq pause TOPIC` (paused true) or `delayq resume
// TOPIC`.
func (a *app) pauseCommand(paused bool) *cobra.Command {
	var flags clientFlags
	action, short := "pause", "Pause a topic's deliveries on every instance; intake goes on"
	if !paused {
		action, short = "resume", "Resume a paused topic's deliveries"
	}
	cmd := &cobra.Command{
		Use:   action + " TOPIC",
		Short: short,
		Long:  short + ". It prints the topic as `delayq topics TOPIC` does. Admin.",
		Args:  cobra.ExactArgs(1),
		RunE: clientRun(&flags, func(ctx context.Context, c *cliClient, cmd *cobra.Command, args []string) error {
			ctx, raw := rawAnswer(ctx)
			call := c.PauseTopic
			if !paused {
				call = c.ResumeTopic
			}
			tp, err := call(ctx, args[0])
			if err != nil {
				return err
			}
			return c.show(cmd.OutOrStdout(), *raw, func(t *tableWriter) { topicRows(t, tp) })
		}),
	}
	addClientFlags(cmd.Flags(), &flags)
	return cmd
}

// claimCommand is `delayq claim TOPIC`.
func (a *app) claimCommand() *cobra.Command {
	var (
		flags   clientFlags
		maxJobs int
		wait    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "claim TOPIC",
		Short: "Claim a topic's due jobs and print each delivery",
		Long: `Claim up to --max due jobs of a topic, waiting up to --wait for the first, and
print each delivery as one JSON line on standard output: id, topic, body,
attempt, run_at, lease and lease_expires_at. Nothing is printed when no job came
within the wait.

Each delivery is held under its lease until its ttr passes: settle it with
'delayq ack ID LEASE' or 'delayq nack ID LEASE', or it is delivered again.`,
		Example: `  delayq claim orders.close --max 10 --wait 20s
  delayq claim orders.close | jq -r '"\(.id) \(.lease)"' | xargs delayq ack`,
		Args: cobra.ExactArgs(1),
		RunE: clientRun(&flags, func(ctx context.Context, c *cliClient, cmd *cobra.Command, args []string) error {
			if maxJobs < 1 || maxJobs > core.ClaimMaxLimit {
				return usageErrorf("invalid --max %d: want 1 to %d", maxJobs, core.ClaimMaxLimit)
			}
			if wait < 0 || wait > core.ClaimWaitLimit {
				return usageErrorf("invalid --wait %s: want 0 to %s", wait, core.ClaimWaitLimit)
			}
			if err := consumerTopic(ctx, c, args[0]); err != nil {
				return err
			}
			// The answer comes after the wait.
			c.http.Timeout = wait + clientRequestTimeout
			ctx, raw := rawAnswer(ctx)
			if _, err := c.Claim(ctx, args[0], &client.ClaimParams{Max: maxJobs, Wait: wait}); err != nil {
				return err
			}
			// The deliveries are printed from the answer as it came, as
			// subscribe prints them, rather than re-encoded from the
			// client's types.
			var v struct {
				Jobs []*deliveryLine `json:"jobs"`
			}
			if err := json.Unmarshal(*raw, &v); err != nil {
				return fmt.Errorf("reading the answer: %w", err)
			}
			if len(v.Jobs) == 0 {
				return nil
			}
			if c.output == outputTable {
				t := newTableWriter(cmd.OutOrStdout())
				deliveryHeader(t)
				for _, d := range v.Jobs {
					deliveryRow(t, d)
				}
				return t.flush()
			}
			for _, d := range v.Jobs {
				if err := writeDelivery(cmd.OutOrStdout(), d); err != nil {
					return err
				}
			}
			return nil
		}),
	}
	fs := cmd.Flags()
	addClientFlags(fs, &flags)
	fs.IntVar(&maxJobs, "max", 1, fmt.Sprintf("most jobs to claim (1-%d)", core.ClaimMaxLimit))
	fs.Var(&durationValue{p: &wait}, "wait", fmt.Sprintf("how long to wait for the first due job, 0 to %s", core.ClaimWaitLimit))
	return cmd
}

// consumerTopic refuses, with exit code 1, to claim or subscribe to a
// topic whose jobs leave by webhook or NATS, which consumers never get:
// without it, claim answers nothing and subscribe waits for ever. A topic
// it cannot read (a token without access, a service down) is left to the
// claim's or subscription's own answer.
func consumerTopic(ctx context.Context, c *cliClient, topic string) error {
	tp, err := c.GetTopic(ctx, topic)
	if err != nil {
		return nil
	}
	var how string
	switch d := tp.Delivery; d.Type {
	case "webhook":
		how = fmt.Sprintf("by webhook: delayq POSTs its jobs to %s", d.URL)
	case "nats":
		how = "by NATS: delayq publishes its jobs"
		if d.Subject != "" {
			how += " on " + d.Subject
		}
	case "kafka":
		how = "to Kafka: delayq produces its jobs to " + d.KafkaTopic
	default:
		return nil
	}
	return &exitCodeError{code: exitError, err: fmt.Errorf("topic %q delivers %s, so consumers get none of its jobs (delayq topics %s)", topic, how, topic)}
}

// ackCommand is `delayq ack ID LEASE [ID LEASE ...]`.
func (a *app) ackCommand() *cobra.Command {
	var flags clientFlags
	cmd := &cobra.Command{
		Use:   "ack ID LEASE [ID LEASE ...]",
		Short: "Acknowledge deliveries: their jobs are done",
		Long: `Acknowledge one or more deliveries, each given by its job's id and lease (as
'delayq claim' prints them), in one request (POST /v1/acks). It prints nothing
on success; each ack that failed (its lease lost, its job unknown) is printed
on standard error as 'ID: message', and the exit code is then 1.`,
		Example: `  delayq ack 01JD2Q0V7Z8N5Y3K2M1R4T6W9X PIC3F2SN...`,
		Args:    cobra.MinimumNArgs(2),
		RunE: clientRun(&flags, func(ctx context.Context, c *cliClient, cmd *cobra.Command, args []string) error {
			pairs, err := leasePairs(args)
			if err != nil {
				return err
			}
			items := make([]client.AckItem, len(pairs))
			for i, p := range pairs {
				items[i] = client.AckItem{ID: p[0], Lease: p[1]}
			}
			results, err := c.AckBatch(ctx, items)
			return settled(cmd.ErrOrStderr(), "acks", pairs, results, err)
		}),
	}
	addClientFlags(cmd.Flags(), &flags)
	return cmd
}

// nackCommand is `delayq nack ID LEASE [ID LEASE ...]`.
func (a *app) nackCommand() *cobra.Command {
	var (
		flags  clientFlags
		delay  string
		reason string
	)
	cmd := &cobra.Command{
		Use:   "nack ID LEASE [ID LEASE ...]",
		Short: "Fail deliveries: their jobs are retried, or go dead",
		Long: `End one or more deliveries, each given by its job's id and lease, as failed, in
one request (POST /v1/nacks): each job is retried after --delay (default: its
topic's backoff), or goes dead when that was its last attempt. --error is kept
as the jobs' last_error. It prints nothing on success; each nack that failed is
printed on standard error as 'ID: message', and the exit code is then 1.`,
		Example: `  delayq nack 01JD2Q0V7Z8N5Y3K2M1R4T6W9X PIC3F2SN... --delay 10m --error "upstream down"`,
		Args:    cobra.MinimumNArgs(2),
		RunE: clientRun(&flags, func(ctx context.Context, c *cliClient, cmd *cobra.Command, args []string) error {
			pairs, err := leasePairs(args)
			if err != nil {
				return err
			}
			params := client.NackParams{Error: reason}
			if delay != "" {
				d, err := flagDuration("delay", delay)
				if err != nil {
					return err
				}
				params.Delay = &d
			}
			items := make([]client.NackItem, len(pairs))
			for i, p := range pairs {
				items[i] = client.NackItem{ID: p[0], Lease: p[1], NackParams: params}
			}
			results, err := c.NackBatch(ctx, items)
			return settled(cmd.ErrOrStderr(), "nacks", pairs, results, err)
		}),
	}
	fs := cmd.Flags()
	addClientFlags(fs, &flags)
	fs.StringVar(&delay, "delay", "", "retry after this long: a duration with its unit (10m, 1500ms); empty: the topic's backoff")
	fs.StringVar(&reason, "error", "", "why the attempts failed, kept as the jobs' last_error")
	return cmd
}

// leasePairs turns ID LEASE ... arguments into pairs; an odd count is a
// usage error.
func leasePairs(args []string) ([][2]string, error) {
	if len(args)%2 != 0 {
		return nil, usageErrorf("want pairs of ID LEASE, but got %d arguments: the lease of %q is missing", len(args), args[len(args)-1])
	}
	pairs := make([][2]string, 0, len(args)/2)
	for i := 0; i < len(args); i += 2 {
		pairs = append(pairs, [2]string{args[i], args[i+1]})
	}
	return pairs, nil
}

// settled reports the outcome of AckBatch or NackBatch (list is "acks" or
// "nacks", for pairs): each item that failed is printed on stderr as
// `ID: message`, and any failure is an error with exit code 1.
func settled(stderr io.Writer, list string, pairs [][2]string, results []client.ItemResult, err error) error {
	if err != nil {
		return err
	}
	n := len(pairs)
	if len(results) != n {
		return fmt.Errorf("the server answered %d results for %d %s", len(results), n, list)
	}
	failed := 0
	for i, r := range results {
		if r.Err == nil {
			continue
		}
		failed++
		fmt.Fprintf(stderr, "%s: %s\n", pairs[i][0], apiMessage(r.Err))
	}
	if failed > 0 {
		return &exitCodeError{code: exitError, err: fmt.Errorf("%d of %d %s failed", failed, n, list)}
	}
	return nil
}

// checkLimit refuses a --limit outside 1 to 1000 (a usage error), since
// the client would take 0 for the service's default.
func checkLimit(limit int) error {
	if limit < 1 || limit > 1000 {
		return usageErrorf("invalid --limit %d: want 1 to 1000", limit)
	}
	return nil
}
