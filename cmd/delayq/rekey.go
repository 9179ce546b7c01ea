package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/delayq/delayq/client"
)

// rekeyPassesMax bounds the passes of `delayq rekey`: each finds only
// what moved in its listing during the one before, unless an instance
// still writes with an older current key.
const rekeyPassesMax = 5

// rekeyCommand is `delayq rekey`.
func (a *app) rekeyCommand() *cobra.Command {
	var (
		flags clientFlags
		limit int
	)
	cmd := &cobra.Command{
		Use:   "rekey",
		Short: "Re-encrypt the stored jobs, topics and schedules with the current key",
		Long: `Re-encrypt, with the current key of the service's --encryption-keys (the
first), what the store holds sealed with an older key or in plaintext: topic
configurations and schedules first, then every job of every topic in every
state, a page of --limit jobs per request (POST /v1/rekey), while the
service runs. Each job's body is rewritten in place, its state, attempts and
lease untouched, so deliveries go on. It prints a line per page and the
totals; a job that changed meanwhile was written by a put with the current
key. It runs passes until one re-encrypts nothing (a job that moved in its
listing during a pass may be missed by it), so that once it exits 0 the old
keys can leave the key file; after 5 passes it gives up and exits 1. It
needs an admin token not restricted to topics.`,
		Example: `  delayq rekey --server http://127.0.0.1:8080 --token "$ADMIN_TOKEN"`,
		Args:    cobra.NoArgs,
		RunE: clientRun(&flags, func(ctx context.Context, c *cliClient, cmd *cobra.Command, _ []string) error {
			if limit < 0 {
				return usageErrorf("--limit must not be negative (0: the service's default)")
			}
			out := cmd.OutOrStdout()
			for pass := 1; pass <= rekeyPassesMax; pass++ {
				var sum client.RekeyPage
				p := &client.RekeyParams{Limit: limit}
				for {
					page, err := c.Rekey(ctx, p)
					if err != nil {
						return err
					}
					sum.Scanned += page.Scanned
					sum.Rekeyed += page.Rekeyed
					sum.Changed += page.Changed
					sum.Records += page.Records
					fmt.Fprintf(out, "pass %d: %d jobs read, %d re-encrypted, %d changed meanwhile, %d topics and schedules re-encrypted\n",
						pass, sum.Scanned, sum.Rekeyed, sum.Changed, sum.Records)
					if page.NextAfter == "" {
						break
					}
					p.After = page.NextAfter
				}
				if sum.Rekeyed == 0 && sum.Records == 0 {
					fmt.Fprintf(out, "done: everything is encrypted with the current key (%d jobs read)\n", sum.Scanned)
					return nil
				}
			}
			return fmt.Errorf("rekey: still re-encrypting after %d passes: does an instance run with another current key?", rekeyPassesMax)
		}),
	}
	addClientFlags(cmd.Flags(), &flags)
	cmd.Flags().IntVar(&limit, "limit", 0, "the most jobs read per request; 0: the service's default (500)")
	return cmd
}
