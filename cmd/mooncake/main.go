package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mooncake-go/mooncake/internal/base"
)

func main() {
	// SIGTERM and SIGINT cancel the context: servers shut down gracefully, client commands stop.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	code := run(ctx, os.Args, os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// version is printed by --version; release builds set it with -ldflags "-X main.version=...".
var version = "dev"

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the command ran and failed
	exitUsage = 2 // bad flags, arguments or configuration
)

// usageError marks errors in what the user typed (exit code 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// env is what the commands take from the process, so tests can run them in-process.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// file is the mooncake.json named by MOONCAKE_CONFIG_PATH, loaded before any command runs.
	file *fileConfig
	// logLevel is the --log_level flag of the root command.
	logLevel string
	// argv0 is the program name, for the lines standalone prints.
	argv0 string
	// verbosity is Mooncake's -v (glog verbosity) on its binary names; >= 1 logs at debug.
	verbosity int
	// mooncakeLines makes the servers print Mooncake's start lines too ("Master service
	// started on port N"), set by the Mooncake binary names.
	mooncakeLines bool
}

// run executes one command line (argv[0] is the program name) and returns the process exit code. Errors are printed as one
// line, `mooncake: <error>`, on stderr; nothing panics on bad input.
func run(ctx context.Context, argv []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv, argv0: argv[0]}
	root := newRootCmd(e)
	root.SetArgs(compatArgs(argv)[1:])
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "mooncake: %s\n", oneLine(err))
	var ue usageError
	// cobra reports an unknown subcommand as a plain error.
	if errors.As(err, &ue) || errors.Is(err, base.ErrInvalidParams) || errors.Is(err, base.ErrInvalidKey) ||
		strings.HasPrefix(err.Error(), "unknown command ") {
		return exitUsage
	}
	return exitError
}

// oneLine keeps an error message on one line and drops the repeated "mooncake: " prefix of
// base's sentinels, since run prints its own.
func oneLine(err error) string {
	s := strings.TrimSpace(err.Error())
	s = strings.ReplaceAll(s, "\r", "")
	s = strings.ReplaceAll(s, "\n", "; ")
	return strings.ReplaceAll(s, "mooncake: ", "")
}

func newRootCmd(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "mooncake",
		Short: "A distributed, tiered KVCache store (masters, workers, standalone) and its CLI",
		Long: `mooncake runs the servers of mooncake-go and talks to them.

Servers:  mooncake standalone | master | worker
Client:   mooncake put | get | rm | ls | status | bench
Memory:   mooncake kvcost | model add|ls|rm | memory
Mooncake: mooncake_master | mooncake_client | mooncake_http_metadata_server, as subcommands or
          under those names (links made by "mooncake install-links DIR" or "make install")

Flags follow Mooncake's names (snake_case). MOONCAKE_CONFIG_PATH may name a mooncake.json with
Mooncake's keys; flags given on the command line override it. Client commands talk to
--master_server_address, else $MOONCAKE_MASTER, else 127.0.0.1:50051.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := parseLevel(e.logLevel); err != nil {
				return usageError{err}
			}
			fc, err := loadConfig(e.getenv)
			if err != nil {
				return usageError{err}
			}
			e.file = fc
			return nil
		},
	}
	root.PersistentFlags().StringVar(&e.logLevel, "log_level", "info", "log level: debug, info, warn or error")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(
		newStandaloneCmd(e), newMasterCmd(e), newWorkerCmd(e),
		newPutCmd(e), newGetCmd(e), newRmCmd(e), newLsCmd(e), newStatusCmd(e), newBenchCmd(e),
		newKVCostCmd(e), newMemoryCmd(e), newModelCmd(e), newTenantCmd(e),
		newMooncakeMasterCmd(e), newMooncakeClientCmd(e), newMetadataServerCmd(e), newInstallLinksCmd(e),
	)
	return root
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("%w: --log_level %q: want debug, info, warn or error", base.ErrInvalidParams, s)
	}
	return l, nil
}

// logger logs text lines to stderr at --log_level.
func (e *env) logger() *slog.Logger {
	l, _ := parseLevel(e.logLevel) // checked in PersistentPreRunE
	if e.verbosity > 0 {
		l = min(l, slog.LevelDebug)
	}
	return slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: l}))
}

// changed reports whether the user gave the flag on the command line.
func changed(fs *pflag.FlagSet, name string) bool {
	f := fs.Lookup(name)
	return f != nil && f.Changed
}

// exactArgs is cobra.ExactArgs with a usage error that names the expected arguments.
func exactArgs(n int, names string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s: want %s, got %d argument(s)", cmd.Name(), names, len(args))
		}
		return nil
	}
}
