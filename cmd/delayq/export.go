package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"

	"github.com/spf13/cobra"
)

// ndjsonType is the media type of export and import.
const ndjsonType = "application/x-ndjson"

// exportCommand is `delayq export`.
func (a *app) exportCommand() *cobra.Command {
	var client clientFlags
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write every scheduled, ready, reserved and dead job to standard output as NDJSON",
		Long: `Write every job that is not finished (scheduled, ready, reserved and dead) to
standard output as NDJSON, one job per line with its body, state, attempt and
last error, but not its lease. 'delayq import' reads it back, into the same
deployment or another backend, for backups and moves. It needs a token with
the admin scope when the service has tokens.

A job that changes while the export runs may be written in its old or new
state. An export cut short (the service failed or went away) exits 1.`,
		Example: `  delayq export --server http://127.0.0.1:8080 > backup.ndjson`,
		Args:    cobra.NoArgs,
		RunE: clientRun(&client, func(ctx context.Context, c *apiClient, cmd *cobra.Command, _ []string) error {
			resp, err := c.stream(ctx, http.MethodGet, "/v1/export", nil)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			out := bufio.NewWriterSize(cmd.OutOrStdout(), 64<<10)
			if _, err := io.Copy(out, resp.Body); err != nil {
				return fmt.Errorf("the export was cut short: %w", err)
			}
			return out.Flush()
		}),
	}
	addClientFlags(cmd.Flags(), &client)
	return cmd
}

// importAnswer is the answer to POST /v1/import.
type importAnswer struct {
	Imported int               `json:"imported"`
	Skipped  int               `json:"skipped"`
	Failed   int               `json:"failed"`
	Errors   []json.RawMessage `json:"errors"`
}

// importCommand is `delayq import [FILE|-]`.
func (a *app) importCommand() *cobra.Command {
	var client clientFlags
	cmd := &cobra.Command{
		Use:   "import [FILE|-]",
		Short: "Import jobs written by 'delayq export'",
		Long: `Import the NDJSON of 'delayq export' from FILE, or standard input for '-' or
no FILE, and print the answer: how many jobs were imported, how many skipped
because their id is in use, how many lines failed, and the errors of the
failed lines with their line numbers.

Each job keeps its id, state, run_at, attempt and last error; a job reserved
when exported is imported ready, since its lease stayed with the old
service. Importing the same file again changes nothing, so an import that
failed part way may simply be run again. It exits 1 when any line failed. It
needs a token with the admin scope when the service has tokens.`,
		Example: `  delayq import backup.ndjson --server http://redis-delayq:8080
  delayq export --server http://old:8080 | delayq import --server http://new:8080`,
		Args: cobra.MaximumNArgs(1),
		RunE: clientRun(&client, func(ctx context.Context, c *apiClient, cmd *cobra.Command, args []string) error {
			in := cmd.InOrStdin()
			if len(args) == 1 && args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return usageError(err)
				}
				defer f.Close()
				in = f
			}
			resp, err := c.stream(ctx, http.MethodPost, "/v1/import", bufio.NewReaderSize(in, 64<<10))
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			answer, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
			if err != nil {
				return fmt.Errorf("reading the answer: %w", err)
			}
			var counts importAnswer
			if err := json.Unmarshal(answer, &counts); err != nil {
				return fmt.Errorf("the service answered something other than import counts: %w", err)
			}
			if err := printJSON(cmd.OutOrStdout(), answer); err != nil {
				return err
			}
			if counts.Failed > 0 {
				return fmt.Errorf("%d lines failed (%d jobs imported, %d skipped)", counts.Failed, counts.Imported, counts.Skipped)
			}
			return nil
		}),
	}
	addClientFlags(cmd.Flags(), &client)
	return cmd
}

// stream sends a request with an NDJSON body (none when nil) and no time
// limit but ctx's, for exports and imports of any size, and returns the
// answer for the caller to read and close when it is 2xx. Any other answer
// is an *apiError (exit 1), as for do.
func (c *apiClient) stream(ctx context.Context, method, path string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", ndjsonType)
	}
	req.Header.Set("Accept", ndjsonType+", application/json")
	return c.send(req)
}

// send sends req with the client's token and no time limit but its
// context's, and returns the answer for the caller to read and close when
// it is 2xx. Any other answer is an *apiError (exit 1), as for do.
func (c *apiClient) send(req *http.Request) (*http.Response, error) {
	c.authorize(req.Header)
	client := &http.Client{Transport: c.http.Transport}
	resp, err := client.Do(req)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return nil, &exitCodeError{code: exitError, err: fmt.Errorf("cannot reach %s (--server, DELAYQ_SERVER): %w", c.base, err)}
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return nil, &exitCodeError{code: exitError, err: decodeAPIError(resp.StatusCode, answer)}
}
