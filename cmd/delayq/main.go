package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/delayq/delayq/internal/buildinfo"
)

// Exit codes of the delayq binary.
const (
	exitOK    = 0
	exitError = 1 // the service failed or the server answered an error
	exitUsage = 2 // a bad flag, environment value or argument
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	a := &app{
		stdin:       os.Stdin,
		stdout:      os.Stdout,
		stderr:      os.Stderr,
		lookupEnv:   os.LookupEnv,
		stopSignals: stop,
		serve:       runServe,
	}
	code := a.run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

// app is the binary's environment, injected so that tests run commands in
// process with their own arguments, environment and output.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// lookupEnv reads environment variables (os.LookupEnv).
	lookupEnv func(string) (string, bool)
	// stopSignals restores the default signal handling once a shutdown has
	// begun, so that a second Ctrl-C ends the process at once.
	stopSignals func()
	// serve runs the service (runServe); tests replace it to inspect the
	// configuration.
	serve func(ctx context.Context, a *app, cfg *serveConfig) error
}

// exitCodeError carries the exit code of a failed command. Errors that
// cobra itself returns (unknown command or flag, bad flag value, wrong
// argument count) have none and are usage errors.
type exitCodeError struct {
	code int
	err  error
}

func (e *exitCodeError) Error() string { return e.err.Error() }
func (e *exitCodeError) Unwrap() error { return e.err }

// usageError marks err as a usage error (exit 2).
func usageError(err error) error { return &exitCodeError{code: exitUsage, err: err} }

// usageErrorf is usageError with a formatted message.
func usageErrorf(format string, args ...any) error {
	return usageError(fmt.Errorf(format, args...))
}

// run executes the command line and returns the exit code.
func (a *app) run(ctx context.Context, args []string) int {
	root := a.rootCommand()
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	code := exitUsage
	var ce *exitCodeError
	if errors.As(err, &ce) {
		code = ce.code
	}
	fmt.Fprintf(a.stderr, "delayq: %v\n", err)
	if code == exitUsage {
		fmt.Fprintf(a.stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return code
}

// rootCommand builds the command tree.
func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "delayq",
		Short: "delayq is a delay-queue service: deliver a job to a topic later, at least once",
		Long: `delayq keeps jobs durably and delivers each to its topic when it is due, at
least once, with retries, backoff, dead-lettering and cancellation.

Start the service with 'delayq serve'; the other commands talk to a running
service over HTTP. Every flag of serve, and --server, --token and --output, has an environment twin:
DELAYQ_ and the flag name upper-cased with dashes as underscores (DELAYQ_HTTP,
DELAYQ_SERVER); a flag on the command line wins.`,
		// --version prints what `delayq version` does.
		Version:       buildinfo.Read().String(),
		SilenceErrors: true,
		SilenceUsage:  true,
		// Environment twins apply to every subcommand once cobra parsed
		// its flags, so that a flag on the command line wins.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return applyEnv(cmd.Flags(), a.lookupEnv)
		},
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.AddCommand(
		a.versionCommand(),
		a.serveCommand(),
		a.pushCommand(),
		a.getCommand(),
		a.cancelCommand(),
		a.findCommand(),
		a.jobsCommand(),
		a.topicsCommand(),
		a.topicCommand(),
		a.scheduleCommand(),
		a.deadCommand(),
		a.requeueCommand(),
		a.pauseCommand(true),
		a.pauseCommand(false),
		a.subscribeCommand(),
		a.claimCommand(),
		a.ackCommand(),
		a.nackCommand(),
		a.exportCommand(),
		a.importCommand(),
		a.rekeyCommand(),
		a.backupCommand(),
	)
	completeOutput(root)
	return root
}

// groupCommand returns a command that only groups subcommands (`jobs`,
// `topic`, `schedule`): alone it prints its help, and an argument that
// names none of its subcommands (`delayq jobs work`) is a usage error
// rather than cobra's silent help.
func groupCommand(use, short string) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
}

// versionCommand is `delayq version`, as `delayq --version`: the binary's
// version, commit and Go version, from its build information.
func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print delayq's version, commit and Go version",
		Long: `Print the version, the commit it was built from (with +modified for a build
of a checkout with uncommitted changes) and the Go version, as the Go toolchain
recorded them in the binary. A running service answers the same on
GET /v1/version.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), buildinfo.Read())
			return err
		},
	}
}

// envAnnotation marks a flag that has a DELAYQ_* environment twin.
const envAnnotation = "delayq_env"

// withEnv gives the named flags of fs environment twins and names the twin
// in each flag's help.
func withEnv(fs *pflag.FlagSet, names ...string) {
	for _, name := range names {
		f := fs.Lookup(name)
		if f == nil {
			panic("delayq: no flag " + name)
		}
		key := envName(name)
		f.Usage += " (env " + key + ")"
		if err := fs.SetAnnotation(name, envAnnotation, []string{key}); err != nil {
			panic(err)
		}
	}
}

// envName returns the environment twin of a flag: --nats-url is
// DELAYQ_NATS_URL.
func envName(flag string) string {
	return "DELAYQ_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// applyEnv sets every flag that has an environment twin and was not given
// on the command line from its twin, when that is set and not empty. A bad
// value is a usage error naming the variable.
func applyEnv(fs *pflag.FlagSet, lookup func(string) (string, bool)) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		keys := f.Annotations[envAnnotation]
		if err != nil || f.Changed || len(keys) == 0 {
			return
		}
		v, ok := lookup(keys[0])
		if !ok || v == "" {
			return
		}
		// Value.Set rather than fs.Set: the flag stays "not given", and
		// the error is not dressed as a command-line one.
		if serr := f.Value.Set(v); serr != nil {
			err = usageErrorf("invalid value %q for %s: %v", v, keys[0], serr)
		}
	})
	return err
}
