package main

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
)

// updateDocs rewrites docs/configuration.md's table of serve flags from
// the flags: go test ./cmd/delayq -run TestConfigurationTable -update.
var updateDocs = flag.Bool("update", false, "rewrite docs/configuration.md's table of serve flags from the flags")

// configurationDoc is the page whose table lists serve's flags.
const configurationDoc = "../../docs/configuration.md"

// tableFlag is a flag named in a row of the table: "| `--tls-cert`, ...".
var tableFlag = regexp.MustCompile("`--([a-z0-9-]+)`")

// TestConfigurationTable: the table of docs/configuration.md lists every
// flag of serve, once, in the order serve defines them, with its
// environment twin, and no flag serve lacks. The rows' flag and environment
// columns are generated from the flags (-update writes them, with a row
// from the flag's help for a flag the table lacks, and drops the rows of
// flags that are gone); the default and values columns are the page's.
func TestConfigurationTable(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile(configurationDoc)
	require.NoError(t, err)
	before, rows, after := splitFlagTable(t, string(page))
	flags := serveFlags()
	want := flagTable(flags, rows)
	if *updateDocs {
		require.NoError(t, os.WriteFile(configurationDoc, []byte(before+strings.Join(want, "\n")+"\n"+after), 0o644))
		return
	}
	listed := strings.Join(rows, "\n")
	var missing []string
	for _, f := range flags {
		if !strings.Contains(listed, "`--"+f.Name+"`") {
			missing = append(missing, "--"+f.Name)
		}
	}
	require.Empty(t, missing, "serve flags missing from docs/configuration.md: go test ./cmd/delayq -run TestConfigurationTable -update adds them")
	require.Equal(t, strings.Join(want, "\n"), listed,
		"docs/configuration.md's table of serve flags is not the flags': go test ./cmd/delayq -run TestConfigurationTable -update")
}

// serveFlags returns serve's flags in the order it defines them.
func serveFlags() []*pflag.Flag {
	fs := (&app{}).serveCommand().Flags()
	fs.SortFlags = false
	var out []*pflag.Flag
	fs.VisitAll(func(f *pflag.Flag) { out = append(out, f) })
	return out
}

// splitFlagTable cuts the page around the rows of the table under
// "### `delayq serve`".
func splitFlagTable(t *testing.T, page string) (before string, rows []string, after string) {
	t.Helper()
	start := strings.Index(page, "### `delayq serve`\n")
	require.GreaterOrEqual(t, start, 0, "no serve section")
	head := strings.Index(page[start:], "| --- |")
	require.GreaterOrEqual(t, head, 0, "no table in the serve section")
	from := start + head + strings.Index(page[start+head:], "\n") + 1
	to := from
	for to < len(page) && strings.HasPrefix(page[to:], "| ") {
		to += strings.Index(page[to:], "\n") + 1
	}
	return page[:from], strings.Split(strings.TrimSuffix(page[from:to], "\n"), "\n"), page[to:]
}

// flagTable returns the rows the table should have: for each flag, in
// order, its row of rows (a row naming several flags, such as --tls-cert
// and --tls-key, once, where its first flag is), its flag and environment
// cells rewritten from the flags; or a new row made from the flag's help.
func flagTable(flags []*pflag.Flag, rows []string) []string {
	byFlag := map[string]string{}
	for _, r := range rows {
		cells := strings.Split(r, " | ")
		for _, m := range tableFlag.FindAllStringSubmatch(cells[0], -1) {
			byFlag[m[1]] = r
		}
	}
	known := map[string]bool{}
	for _, f := range flags {
		known[f.Name] = true
	}
	var out []string
	done := map[string]bool{}
	for _, f := range flags {
		r, ok := byFlag[f.Name]
		if !ok {
			usage, _, _ := strings.Cut(f.Usage, " (env ")
			def := "`" + f.DefValue + "`"
			if f.DefValue == "" {
				def = ""
			}
			out = append(out, fmt.Sprintf("| `--%s` | `%s` | %s | %s. |", f.Name, envName(f.Name), def, strings.ToUpper(usage[:1])+usage[1:]))
			continue
		}
		if done[r] {
			continue
		}
		done[r] = true
		var names, envs []string
		for _, m := range tableFlag.FindAllStringSubmatch(strings.Split(r, " | ")[0], -1) {
			if known[m[1]] { // a flag that is gone leaves the row
				names = append(names, "`--"+m[1]+"`")
				envs = append(envs, "`"+envName(m[1])+"`")
			}
		}
		cells := strings.SplitN(r, " | ", 3)
		out = append(out, "| "+strings.Join(names, ", ")+" | "+strings.Join(envs, ", ")+" | "+cells[2])
	}
	return out
}
