package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/delayq/delayq/client"
)

// exportCommand is `delayq export`.
func (a *app) exportCommand() *cobra.Command {
	var (
		flags     clientFlags
		plaintext bool
	)
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write every scheduled, ready, reserved and dead job to standard output as NDJSON",
		Long: `Write every job that is not finished (scheduled, ready, reserved and dead) to
standard output as NDJSON, one job per line with its body, state, attempt and
last error, but not its lease. 'delayq import' reads it back, into the same
deployment or another backend, for backups and moves. It needs a token with
the admin scope when the service has tokens.

A job that changes while the export runs may be written in its old or new
state. An export cut short (the service failed or went away) exits 1.

With encryption at rest (serve --encryption-keys), job and schedule bodies
are exported sealed with the service's current key, which 'delayq import'
into a service holding that key opens; --plaintext asks for them in clear.`,
		Example: `  delayq export --server http://127.0.0.1:8080 > backup.ndjson`,
		Args:    cobra.NoArgs,
		RunE: clientRun(&flags, func(ctx context.Context, c *cliClient, cmd *cobra.Command, _ []string) error {
			// An export lasts as long as it takes.
			c.http.Timeout = 0
			out := bufio.NewWriterSize(cmd.OutOrStdout(), 64<<10)
			err := c.ExportWith(ctx, client.ExportOptions{Plaintext: plaintext}, func(line json.RawMessage) error {
				if _, err := out.Write(line); err != nil {
					return err
				}
				return out.WriteByte('\n')
			})
			// What came before a failure is written, as it was before.
			if ferr := out.Flush(); err == nil {
				err = ferr
			}
			if errors.Is(err, client.ErrExportTruncated) {
				// Say what happened, with the cause when there is one,
				// as the lines written may be taken for the whole export.
				return errors.New("the export was cut short" + strings.TrimPrefix(err.Error(), client.ErrExportTruncated.Error()))
			}
			return err
		}),
	}
	addClientFlags(cmd.Flags(), &flags)
	cmd.Flags().BoolVar(&plaintext, "plaintext", false, "with encryption at rest: export the bodies in clear rather than sealed")
	return cmd
}

// importCommand is `delayq import [FILE|-]`.
func (a *app) importCommand() *cobra.Command {
	var flags clientFlags
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
		RunE: clientRun(&flags, func(ctx context.Context, c *cliClient, cmd *cobra.Command, args []string) error {
			in := cmd.InOrStdin()
			if len(args) == 1 && args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return usageError(err)
				}
				defer f.Close()
				in = f
			}
			// An import lasts as long as it takes.
			c.http.Timeout = 0
			ctx, raw := rawAnswer(ctx)
			counts, err := c.Import(ctx, bufio.NewReaderSize(in, 64<<10))
			if err != nil {
				return err
			}
			err = c.show(cmd.OutOrStdout(), *raw, func(t *tableWriter) {
				t.row("imported", itoa(counts.Imported))
				t.row("skipped", itoa(counts.Skipped))
				t.row("failed", itoa(counts.Failed))
				for _, le := range counts.Errors {
					msg := le.Err.Error()
					if ae, ok := errors.AsType[*client.APIError](le.Err); ok {
						msg = ae.Code + ": " + ae.Message
						if ae.Field != "" {
							msg += " (field " + ae.Field + ")"
						}
					}
					t.row("line "+itoa(le.Line), msg)
				}
			})
			if err != nil {
				return err
			}
			if counts.Failed > 0 {
				return fmt.Errorf("%d lines failed (%d jobs imported, %d skipped)", counts.Failed, counts.Imported, counts.Skipped)
			}
			return nil
		}),
	}
	addClientFlags(cmd.Flags(), &flags)
	return cmd
}
