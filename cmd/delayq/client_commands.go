package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"
)

// pushRequest is the body of POST /v1/jobs; unset fields are left out.
type pushRequest struct {
	Topic       string          `json:"topic"`
	Body        json.RawMessage `json:"body,omitempty"`
	Delay       json.RawMessage `json:"delay,omitempty"`
	RunAt       string          `json:"run_at,omitempty"`
	ID          string          `json:"id,omitempty"`
	TTR         string          `json:"ttr,omitempty"`
	MaxAttempts int             `json:"max_attempts,omitempty"`
	Key         string          `json:"key,omitempty"`
}

// pushCommand is `delayq push TOPIC [BODY|-]`.
func (a *app) pushCommand() *cobra.Command {
	var (
		client            clientFlags
		delay, runAt, ttr string
		req               pushRequest
	)
	cmd := &cobra.Command{
		Use:   "push TOPIC [BODY|-]",
		Short: "Push a job to a topic",
		Long: `Push a job to a topic and print the answer: its id, topic, run_at and state.

BODY is a JSON value ('{"order": 42}', '"text"', 7); '-' reads it from standard
input; without BODY the job's body is null. --delay and --run-at are exclusive;
with neither the job is due now.`,
		Example: `  delayq push orders.close '{"order": 42}' --delay 15m
  echo '{"order": 42}' | delayq push orders.close - --run-at 2030-01-01T10:00:00Z`,
		Args: cobra.RangeArgs(1, 2),
		RunE: clientRun(&client, func(ctx context.Context, c *apiClient, cmd *cobra.Command, args []string) error {
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
				d, err := delayJSON(delay)
				if err != nil {
					return err
				}
				req.Delay = d
			}
			if runAt != "" {
				if _, err := time.Parse(time.RFC3339Nano, runAt); err != nil {
					return usageErrorf("invalid --run-at %q: want RFC 3339 such as 2030-01-01T10:00:00.250Z", runAt)
				}
				req.RunAt = runAt
			}
			if ttr != "" {
				if _, err := time.ParseDuration(ttr); err != nil {
					return usageErrorf("invalid --ttr %q: want a duration such as 30s", ttr)
				}
				req.TTR = ttr
			}
			answer, err := c.do(ctx, http.MethodPost, "/v1/jobs", &req)
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), answer)
		}),
	}
	fs := cmd.Flags()
	addClientFlags(fs, &client)
	fs.StringVar(&delay, "delay", "", "deliver after this long: a duration (15m, 1500ms) or milliseconds")
	fs.StringVar(&runAt, "run-at", "", "deliver at this RFC 3339 time")
	fs.StringVar(&req.ID, "id", "", "the job's id (default: a new one)")
	fs.StringVar(&ttr, "ttr", "", "time to run: how long a consumer holds a delivery (default: the topic's)")
	fs.IntVar(&req.MaxAttempts, "max-attempts", 0, "most deliveries before the job goes dead (default: the topic's)")
	fs.StringVar(&req.Key, "key", "", "business key")
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

// delayJSON turns --delay into its JSON form: a whole number of milliseconds
// stays a number, a Go duration becomes a string. The server checks the
// range; the syntax is checked here.
func delayJSON(s string) (json.RawMessage, error) {
	if _, err := strconv.ParseInt(s, 10, 64); err == nil {
		return json.RawMessage(s), nil
	}
	if _, err := time.ParseDuration(s); err != nil {
		return nil, usageErrorf("invalid --delay %q: want a duration such as 15m or 1500ms, or milliseconds", s)
	}
	return json.Marshal(s)
}

// getCommand is `delayq get ID`.
func (a *app) getCommand() *cobra.Command {
	var client clientFlags
	cmd := &cobra.Command{
		Use:   "get ID",
		Short: "Print a job: its fields, state and attempts",
		Args:  cobra.ExactArgs(1),
		RunE: clientRun(&client, func(ctx context.Context, c *apiClient, cmd *cobra.Command, args []string) error {
			answer, err := c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(args[0]), nil)
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), answer)
		}),
	}
	addClientFlags(cmd.Flags(), &client)
	return cmd
}

// cancelCommand is `delayq cancel ID`.
func (a *app) cancelCommand() *cobra.Command {
	var client clientFlags
	cmd := &cobra.Command{
		Use:   "cancel ID",
		Short: "Cancel a job that is not being delivered",
		Long:  "Cancel a job that is scheduled, ready or dead. It prints nothing on success.",
		Args:  cobra.ExactArgs(1),
		RunE: clientRun(&client, func(ctx context.Context, c *apiClient, cmd *cobra.Command, args []string) error {
			answer, err := c.do(ctx, http.MethodDelete, "/v1/jobs/"+url.PathEscape(args[0]), nil)
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), answer)
		}),
	}
	addClientFlags(cmd.Flags(), &client)
	return cmd
}

// topicsCommand is `delayq topics [TOPIC]`.
func (a *app) topicsCommand() *cobra.Command {
	var client clientFlags
	cmd := &cobra.Command{
		Use:   "topics [TOPIC]",
		Short: "List topics with their job counts, or show one topic",
		Args:  cobra.MaximumNArgs(1),
		RunE: clientRun(&client, func(ctx context.Context, c *apiClient, cmd *cobra.Command, args []string) error {
			path := "/v1/topics"
			if len(args) == 1 {
				path += "/" + url.PathEscape(args[0])
			}
			answer, err := c.do(ctx, http.MethodGet, path, nil)
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), answer)
		}),
	}
	addClientFlags(cmd.Flags(), &client)
	return cmd
}
