package mlccheck

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Exit statuses of the command.
const (
	ExitPassed = 0 // every check passed or was skipped
	ExitFailed = 1 // a check failed
	ExitError  = 2 // the checks could not run: the config, or starting the engines
)

// DefaultTimeout bounds each call to an engine, a whole stream included.
const DefaultTimeout = 60 * time.Second

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "mlc-check",
		Usage: "--config <path> [--adapter <name>] [--start] [--wait <duration>] [--timeout <duration>] [--json] [--verbose]",
		Short: "Checks the engines of every mlc_router in a config, before traffic",
		Long: `
Reads a config (a Caddyfile or JSON), finds every mlc_router handler in it,
and talks to the engines each one names, directly, as the router would,
without routing a client's request to them. Each check is a row: the check,
the engine(s), pass, fail or skipped, and the reason.

  models             every engine answers GET /v1/models with the model
  completion         a token-id prompt gives the same greedy text whole and streamed
  completion_string  so does a string prompt, tokenized as the router does
                     (where the router has the model's tokenizer)
  context_length     the engine holds the context the router bounds requests by
  nvshmem_world      the engine's PE and world are the config's, and the engines
                     agree on the world (caddy-mlc's engines report it)
  disagg             for each pair of prefill and decode engines and several
                     prompts, prep_recv, remote_send and start_generate give
                     exactly the text one engine gives alone
  disagg_prefix      the same with a prefix the decode engine holds (prefix_cache radix)
  kv_metadata        prep_recv's kv_append_metadata is well formed, and the
                     recv_rank the router sends is the decode engine's PE
  user_ids           request ids (the user field) behave as the router relies on
  release            caddy-mlc's release extension (not MLC's engines)

With "engine mlc" only MLC's own API is used: the checks of caddy-mlc's
extensions are skipped, and say so. --start starts the engines first, as
Caddy would (fails when their ports are taken), and stops them before it
exits, also on an error or a signal. --wait waits up to that long for the
engines to answer before checking them. --json prints the results as JSON.

Exit status: 0 when no check failed (skipped is not failed), 1 when one
did, 2 when the checks could not run (the config, starting the engines).`,
		CobraFunc: func(cmd *cobra.Command) {
			AddFlags(cmd.Flags())
			cmd.RunE = caddycmd.WrapCommandFuncForCobra(func(fl caddycmd.Flags) (int, error) {
				opts, err := OptionsFrom(fl)
				if err != nil {
					return ExitError, err
				}
				ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				return Run(ctx, opts, os.Stdout, newLogger(opts.Verbose))
			})
		},
	})
}

// Options are the command's flags.
type Options struct {
	Config  string
	Adapter string
	Start   bool
	Wait    time.Duration
	Timeout time.Duration
	JSON    bool
	Verbose bool
}

// AddFlags adds the command's flags to fs.
func AddFlags(fs *pflag.FlagSet) {
	fs.StringP("config", "c", "", "Configuration file (a Caddyfile, or JSON)")
	fs.StringP("adapter", "a", "", "Name of config adapter to apply")
	fs.Bool("start", false, "Start the engines first, and stop them before exiting")
	fs.Duration("wait", 0, "Wait up to this long for the engines to answer before checking")
	fs.Duration("timeout", DefaultTimeout, "Bound on each call to an engine")
	fs.Bool("json", false, "Print the results as JSON")
	fs.BoolP("verbose", "v", false, "Log every check and the engines' output")
}

// OptionsFrom reads the flags AddFlags added.
func OptionsFrom(fl caddycmd.Flags) (Options, error) {
	o := Options{
		Config:  fl.String("config"),
		Adapter: fl.String("adapter"),
		Start:   fl.Bool("start"),
		Wait:    fl.Duration("wait"),
		Timeout: fl.Duration("timeout"),
		JSON:    fl.Bool("json"),
		Verbose: fl.Bool("verbose"),
	}
	if o.Timeout <= 0 || o.Wait < 0 {
		return o, fmt.Errorf("--timeout must be positive and --wait not negative")
	}
	return o, nil
}

// newLogger logs to stderr: warnings, or everything with verbose.
func newLogger(verbose bool) *zap.Logger {
	level := zapcore.WarnLevel
	if verbose {
		level = zapcore.DebugLevel
	}
	enc := zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig())
	return zap.New(zapcore.NewCore(enc, zapcore.Lock(os.Stderr), level))
}

// Run runs the checks of the config opts names and writes the report to
// out; it returns the exit status, with an error that says why when it is
// not 0. Engines it started are stopped before it returns.
func Run(ctx context.Context, opts Options, out io.Writer, log *zap.Logger) (int, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	config, _, _, err := caddycmd.LoadConfig(opts.Config, opts.Adapter)
	if err != nil {
		return ExitError, err
	}
	if len(config) == 0 {
		return ExitError, errors.New("no config: name one with --config")
	}
	routers, err := findRouters(config)
	if err != nil {
		return ExitError, err
	}
	if len(routers) == 0 {
		return ExitError, errors.New("the config has no mlc_router handler")
	}
	if opts.Start {
		fl, err := startFleets(ctx, routers, log)
		if err != nil {
			return ExitError, err
		}
		defer fl.stop()
	}
	c := newClient(opts.Timeout)
	defer c.close()
	if opts.Wait > 0 {
		if left := waitEngines(ctx, routers, opts.Wait, c.http); len(left) > 0 {
			log.Warn("engines still not answering; checking anyway", zap.Strings("engines", left), zap.Duration("waited", opts.Wait))
		}
	}
	nonce := make([]byte, 4)
	_, _ = rand.Read(nonce)
	report := &Report{}
	for _, r := range routers {
		newChecker(c, log, report, r, hex.EncodeToString(nonce)).run(ctx)
	}
	if opts.JSON {
		err = report.WriteJSON(out)
	} else {
		err = report.WriteTable(out)
	}
	switch {
	case err != nil:
		return ExitError, fmt.Errorf("writing the report: %w", err)
	case ctx.Err() != nil:
		return ExitError, fmt.Errorf("interrupted: %w", context.Cause(ctx))
	case !report.OK():
		return ExitFailed, fmt.Errorf("%s failed%s", failedChecks(report), refusedHint(report, opts))
	}
	return ExitPassed, nil
}

// refusedHint is what to do when engines refused the connection and
// mlc-check did not start them: start them, or Caddy.
func refusedHint(r *Report, opts Options) string {
	if opts.Start {
		return ""
	}
	for _, res := range r.Results {
		if res.Status == Fail && strings.Contains(res.Reason, "connection refused") {
			return fmt.Sprintf("; engines refused the connection: nothing listens there. Start them with --start "+
				"(caddy mlc-check --config %s --start), or run Caddy with the config first and check with --wait 60s", opts.Config)
		}
	}
	return ""
}

// failedChecks names the checks that failed, and their engines.
func failedChecks(r *Report) string {
	var names []string
	for _, res := range r.Results {
		if res.Status == Fail {
			names = append(names, fmt.Sprintf("%s (%s)", res.Check, engineList(res.Check, res.Engines)))
		}
	}
	return strings.Join(names, ", ")
}
