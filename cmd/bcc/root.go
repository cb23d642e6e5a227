package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Exit codes (docs/bcc.md "Exit codes"; held by TestExitCodes on the built
// binary).
const (
	exitOK     = 0 // fine: healthy, nothing to do, done
	exitError  = 1 // usage or error: bad flags or arguments, an unknown collection, an unreadable file, a failed write
	exitAction = 2 // something needs a person: Degraded or Unknown, a stalled lease, a plan to apply, a refusal
)

// Environment variables the CLI reads (flags win).
const (
	envStack    = "BCC_STACK"
	envPrefix   = "BCC_PREFIX"
	envBucket   = "BCC_BUCKET"
	envTable    = "BCC_TABLE"
	envCCS      = "BCC_CCS_ENDPOINT"
	envWMBucket = "BCC_WATERMARK_BUCKET"
	envWMKey    = "BCC_WATERMARK_KEY"
	envPolicy   = "BCC_POLICY"
	envOutput   = "BCC_OUTPUT"
	envEndpoint = "AWS_ENDPOINT_URL"
	envRegion   = "AWS_REGION"
	envProfile  = "AWS_PROFILE"
)

// globals are the persistent flags: accepted before or after the command.
type globals struct {
	stack, prefix, bucket, table, ccs, wmBucket, wmKey, policy string
	region, profile, endpoint                                  string
	output                                                     string
	debug                                                      bool
	// flags are the flags given on the command line (not taken from the
	// environment): a flag wins over a variable.
	flags map[string]bool
}

// cli is one invocation.
type cli struct {
	ctx         context.Context
	out, errOut io.Writer
	getenv      func(string) string
	g           globals
	code        int
	// clock is the system's clock: every write takes its time from it
	// (rule 16); --now only moves read-only views.
	clock func() time.Time
}

// usageError is a mistake in the command line (exit 1, with a pointer to
// the command's help).
type usageError struct {
	cmd string
	err error
}

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// Main runs bcc with args and returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	c := &cli{ctx: ctx, out: stdout, errOut: stderr, getenv: getenv, clock: time.Now}
	root := c.root()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteC()
	if err != nil {
		var u usageError
		if !errors.As(err, &u) && isUsage(err) {
			u = usageError{cmd: cmd.CommandPath(), err: err}
		}
		fmt.Fprintln(stderr, "bcc: "+strings.TrimRight(err.Error(), "\n"))
		if u.err != nil {
			fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", u.cmdPath(cmd))
		}
		return exitError
	}
	return c.code
}

func (u usageError) cmdPath(cmd *cobra.Command) string {
	if u.cmd != "" {
		return u.cmd
	}
	return cmd.CommandPath()
}

// isUsage tells cobra's command-line errors (unknown command or flag,
// arguments, required or exclusive flags) from a command's own.
func isUsage(err error) bool {
	s := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "flag needs an argument", "invalid argument",
		"accepts ", "required flag", "if any flags in the group", "none of the others can be", "bad flag syntax"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

const rootLong = `bcc is the operator's view of the Background Compute Coordinator, and its
few confirmed actions.

Views read and never write (rule 10): status, leases, plan, gc-plan,
compaction-plan, and recover, apply and confirm-lineage without their
confirming flag. A view may be judged at another time with --now (a
what-if); the writes (recover --confirm, apply --confirm,
confirm-lineage --yes) take the system's clock only and refuse --now
(rule 16). A source that cannot be read is reported Unknown, never
guessed healthy.

Finding the deployment: --stack NAME reads the CloudFormation stack's
outputs (bucket, table, queues, owner endpoints); --prefix P names a
deployment with fixed names (make local's: --prefix bcc). The stack
output BccCommand is a ready command line.

Exit codes: 0 fine; 1 usage or error; 2 something needs a person
(Degraded or Unknown, a stalled lease, a plan to apply, a refusal).`

func (c *cli) root() *cobra.Command {
	root := &cobra.Command{
		Use:           "bcc",
		Short:         "the Background Compute Coordinator's operator CLI",
		Long:          rootLong,
		SilenceErrors: true,
		SilenceUsage:  true,
		Example: `  bcc --stack bcc-coordinator status
  bcc --stack bcc-coordinator leases --collection orders
  bcc --prefix bcc --endpoint-url http://127.0.0.1:4566 plan -o json > plan.json`,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			c.g.flags = map[string]bool{}
			cmd.Flags().Visit(func(f *pflag.Flag) { c.g.flags[f.Name] = true })
			if c.g.output != "table" && c.g.output != "json" {
				return usageError{err: fmt.Errorf("--output %q: want json or table", c.g.output)}
			}
			return nil
		},
	}
	env := func(name, def string) string {
		if v := c.getenv(name); v != "" {
			return v
		}
		return def
	}
	pf := root.PersistentFlags()
	pf.StringVar(&c.g.stack, "stack", env(envStack, ""), "CloudFormation stack of the deployment: its outputs name the bucket, table, queues and owner endpoints [$"+envStack+"]")
	pf.StringVar(&c.g.prefix, "prefix", env(envPrefix, ""), "resource prefix of a deployment with fixed names (make local's: bcc) [$"+envPrefix+"]")
	pf.StringVar(&c.g.bucket, "bucket", env(envBucket, ""), "data bucket (with --prefix: instead of <prefix>-data) [$"+envBucket+"]")
	pf.StringVar(&c.g.table, "table", env(envTable, ""), "coordinator table (with --prefix: instead of <prefix>-coordinator) [$"+envTable+"]")
	pf.StringVar(&c.g.ccs, "ccs", env(envCCS, ""), "CCS endpoint (default: the stack's); without one, CCS facts are Unknown [$"+envCCS+"]")
	pf.StringVar(&c.g.wmBucket, "watermark-bucket", env(envWMBucket, ""), "bucket of the query plane's watermark (default: the stack's, else the data bucket) [$"+envWMBucket+"]")
	pf.StringVar(&c.g.wmKey, "watermark-key", env(envWMKey, ""), "key of the query plane's watermark (default: the stack's, else the deployment's) [$"+envWMKey+"]")
	pf.StringVar(&c.g.policy, "policy", env(envPolicy, ""), "policy JSON overriding the defaults, as the functions' BCC_POLICY [$"+envPolicy+"]")
	pf.StringVar(&c.g.region, "region", "", "AWS region [$"+envRegion+"]")
	pf.StringVar(&c.g.profile, "profile", "", "AWS shared-config profile [$"+envProfile+"]")
	pf.StringVar(&c.g.endpoint, "endpoint-url", env(envEndpoint, ""), "AWS endpoint of a local stack (make local: http://127.0.0.1:4566) [$"+envEndpoint+"]")
	pf.StringVarP(&c.g.output, "output", "o", env(envOutput, "table"), "output format: table or json (docs/bcc.md \"JSON output\") [$"+envOutput+"]")
	pf.BoolVar(&c.g.debug, "debug", false, "log the AWS SDK's retries and requests and the coordinator's debug lines to stderr")
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"table", "json"}, cobra.ShellCompDirectiveNoFileComp))
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		if strings.Contains(err.Error(), "--json") {
			err = fmt.Errorf("%w (JSON output is -o json)", err)
		}
		return usageError{cmd: cmd.CommandPath(), err: err}
	})
	root.CompletionOptions.HiddenDefaultCmd = false
	root.AddGroup(&cobra.Group{ID: "views", Title: "Views (read-only):"}, &cobra.Group{ID: "actions", Title: "Confirmed actions (dry run without their confirming flag):"})
	root.SetHelpCommandGroupID("")
	root.SetUsageTemplate(usageTemplate)
	for _, cmd := range []*cobra.Command{c.statusCmd(), c.leasesCmd(), c.planCmd(), c.gcPlanCmd(), c.compactionPlanCmd()} {
		cmd.GroupID = "views"
		root.AddCommand(cmd)
	}
	for _, cmd := range []*cobra.Command{c.recoverCmd(), c.applyCmd(), c.confirmLineageCmd()} {
		cmd.GroupID = "actions"
		root.AddCommand(cmd)
	}
	// "bcc help TOPIC" for an unknown TOPIC is an unknown command (exit
	// 1), as "bcc TOPIC" is; cobra's help command prints the usage and
	// exits 0.
	root.InitDefaultHelpCmd()
	for _, sub := range root.Commands() {
		if sub.Name() == "help" && sub.Run != nil {
			show := sub.Run
			sub.Run = nil
			sub.RunE = func(cmd *cobra.Command, args []string) error {
				target, rest, err := root.Find(args)
				switch {
				case err != nil: // cobra's own answer, with its suggestions
					return usageError{cmd: "bcc", err: err}
				case len(rest) > 0:
					return usageError{cmd: "bcc", err: fmt.Errorf("unknown command %q for %q", rest[0], target.CommandPath())}
				}
				show(cmd, args)
				return nil
			}
		}
	}
	return root
}

// command is the shape every subcommand shares: no positional arguments,
// flag errors as usage errors, run returning the exit code.
func (c *cli) command(use, short, long, example string, run func(cmd *cobra.Command) (int, error)) *cobra.Command {
	return &cobra.Command{
		Use: use, Short: short, Long: long, Example: example,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{cmd: cmd.CommandPath(), err: fmt.Errorf("%s takes no arguments, got %q (flags start with --)", cmd.CommandPath(), strings.Join(args, " "))}
			}
			return nil
		},
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			code, err := run(cmd)
			c.code = code
			return err
		},
	}
}

// nowFlag adds --now to a read-only view (or a dry run).
func nowFlag(fs *pflag.FlagSet, v *string) {
	fs.StringVar(v, "now", "", "judge the view at this time instead of the clock (RFC 3339 or unix ms): a what-if, never with a write")
}

// collectionFlag adds --collection.
func collectionFlag(fs *pflag.FlagSet, v *string, what string) {
	fs.StringVarP(v, "collection", "c", "", what)
}

// usageTemplate is cobra's, with a command's inherited (global) flags said
// in one line instead of repeated under every command: bcc --help lists
// them.
const usageTemplate = `Usage:{{if .Runnable}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} [command]{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}{{$cmds := .Commands}}{{if eq (len .Groups) 0}}

Available Commands:{{range $cmds}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{else}}{{range $group := .Groups}}

{{.Title}}{{range $cmds}}{{if (and (eq .GroupID $group.ID) (or .IsAvailableCommand (eq .Name "help")))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{if not .AllChildCommandsHaveGroup}}

Additional Commands:{{range $cmds}}{{if (and (eq .GroupID "") (or .IsAvailableCommand (eq .Name "help")))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{end}}{{end}}{{if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableInheritedFlags}}

Global flags (--stack, --prefix, --endpoint-url, --region, --profile, --ccs,
-o/--output, --debug, ...) go before or after the command: bcc --help lists them.{{end}}{{if .HasAvailableSubCommands}}

Use "{{.CommandPath}} [command] --help" for more information about a command.{{end}}
`
