/*
Copyright 2026 The nettune Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Command kubectl-nettune is the kubectl plugin of nettune: put it on the
// PATH and run `kubectl nettune ...`. It talks only to the Kubernetes API
// (kubeconfig from --kubeconfig, else $KUBECONFIG, else ~/.kube/config, else
// in-cluster) and acts on a NetTuningProfile's rollout through the same
// objects the controller reads: spec.rollout.paused, and the annotations
// nettune.io/promote, nettune.io/abort and nettune.io/exclude.
//
//	kubectl nettune status PROFILE [--watch] [--interval 2s]
//	    the rollout: phase, revisions, steps ([x] done, [>] current, [ ] pending,
//	    [!] where it was rolled back), the current step's analysis results,
//	    the True conditions, and one row per vehicle (hardware, canary/baseline/
//	    excluded, assigned revision, verified/total nodes, Verified/Updating/
//	    Unreachable/Failed, last heartbeat).
//	kubectl nettune promote PROFILE
//	    nettune.io/promote=<status.currentRevision>@<status.currentStep>: skip the current pause step
//	    (or analysis step) now.
//	kubectl nettune pause PROFILE / resume PROFILE
//	    spec.rollout.paused=true / false.
//	kubectl nettune abort PROFILE
//	    nettune.io/abort=<status.currentRevision>: roll the revision in
//	    progress back; every vehicle returns to the stable revision.
//	kubectl nettune undo PROFILE [--to-revision NAME] [--namespace nettune-system]
//	    restore the profile's content (everything but spec.rollout) from a
//	    stored revision (a ControllerRevision; default status.stableRevision).
//	kubectl nettune exclude PROFILE VEHICLE... / include PROFILE VEHICLE...
//	    edit nettune.io/exclude: excluded vehicles stay on the stable revision.
//	kubectl nettune revisions PROFILE
//	    the revision history from status.revisions.
//
// promote and abort fail when nothing is rolling out (the current revision is
// the stable one, or it was rolled back). Every change is a JSON merge patch
// (undo: an update guarded by resourceVersion) followed by a one-line
// confirmation; errors name the profile, revision or vehicle at fault and exit
// with status 1 (2 for usage errors).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nettune/nettune/internal/scheme"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// defaultRevisionNamespace is where the controller keeps revisions unless it
// runs with another --namespace.
const defaultRevisionNamespace = "nettune-system"

func main() {
	// controller-runtime warns when something logs before a logger is set.
	ctrllog.SetLogger(logr.Discard())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runContext(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the plugin's entry point: it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdout, stderr)
}

// cli holds the connection flags shared by every command and the output.
type cli struct {
	stdout, stderr io.Writer

	kubeconfig  string
	kubecontext string
	namespace   string

	c   client.Client
	now func() time.Time
}

// register adds the flags every command takes.
func (c *cli) register(fs *flag.FlagSet) {
	fs.StringVar(&c.kubeconfig, "kubeconfig", c.kubeconfig, "path of the kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
	fs.StringVar(&c.kubecontext, "context", c.kubecontext, "kubeconfig context to use")
	fs.StringVar(&c.namespace, "namespace", c.namespace, "namespace of the controller's revisions (ControllerRevisions)")
	fs.StringVar(&c.namespace, "n", c.namespace, "shorthand for --namespace")
}

// client connects to the API server once.
func (c *cli) client() (client.Client, error) {
	if c.c != nil {
		return c.c, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: c.kubecontext}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.UserAgent = "kubectl-nettune"
	s, err := scheme.New()
	if err != nil {
		return nil, err
	}
	cl, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", cfg.Host, err)
	}
	c.c = cl
	return cl, nil
}

// command is one subcommand.
type command struct {
	name     string
	args     string // positional arguments, for usage
	summary  string
	minArgs  int
	maxArgs  int // -1: unbounded
	examples []string
	// flags registers the command's own flags; the returned function runs it.
	flags func(fs *flag.FlagSet, c *cli) func(ctx context.Context, pos []string) error
}

func commands() []command {
	return []command{
		{
			name: "status", args: "PROFILE", minArgs: 1, maxArgs: 1,
			summary:  "show the rollout: steps, analysis, conditions and every vehicle",
			examples: []string{"kubectl nettune status xavier-lan", "kubectl nettune status xavier-lan --watch --interval 5s"},
			flags: func(fs *flag.FlagSet, c *cli) func(context.Context, []string) error {
				watch := fs.Bool("watch", false, "print the status again every --interval until interrupted")
				fs.BoolVar(watch, "w", false, "shorthand for --watch")
				interval := fs.Duration("interval", 2*time.Second, "time between two prints with --watch")
				return func(ctx context.Context, pos []string) error {
					return c.status(ctx, pos[0], *watch, *interval)
				}
			},
		},
		{
			name: "promote", args: "PROFILE", minArgs: 1, maxArgs: 1,
			summary:  "skip the current pause (or analysis) step of the rollout in progress",
			examples: []string{"kubectl nettune promote xavier-lan"},
			flags: func(_ *flag.FlagSet, c *cli) func(context.Context, []string) error {
				return func(ctx context.Context, pos []string) error { return c.promote(ctx, pos[0]) }
			},
		},
		{
			name: "pause", args: "PROFILE", minArgs: 1, maxArgs: 1,
			summary:  "hold the rollout at its current step (spec.rollout.paused=true)",
			examples: []string{"kubectl nettune pause xavier-lan"},
			flags: func(_ *flag.FlagSet, c *cli) func(context.Context, []string) error {
				return func(ctx context.Context, pos []string) error { return c.setPaused(ctx, pos[0], true) }
			},
		},
		{
			name: "resume", args: "PROFILE", minArgs: 1, maxArgs: 1,
			summary:  "let a paused rollout go on (spec.rollout.paused=false)",
			examples: []string{"kubectl nettune resume xavier-lan"},
			flags: func(_ *flag.FlagSet, c *cli) func(context.Context, []string) error {
				return func(ctx context.Context, pos []string) error { return c.setPaused(ctx, pos[0], false) }
			},
		},
		{
			name: "abort", args: "PROFILE", minArgs: 1, maxArgs: 1,
			summary:  "roll the revision in progress back: every vehicle returns to the stable revision",
			examples: []string{"kubectl nettune abort xavier-lan"},
			flags: func(_ *flag.FlagSet, c *cli) func(context.Context, []string) error {
				return func(ctx context.Context, pos []string) error { return c.abort(ctx, pos[0]) }
			},
		},
		{
			name: "undo", args: "PROFILE", minArgs: 1, maxArgs: 1,
			summary:  "restore the profile's content from a stored revision (default: the stable one), keeping spec.rollout",
			examples: []string{"kubectl nettune undo xavier-lan", "kubectl nettune undo xavier-lan --to-revision xavier-lan-5f7c9d2a1b"},
			flags: func(fs *flag.FlagSet, c *cli) func(context.Context, []string) error {
				to := fs.String("to-revision", "", "revision to restore (default: status.stableRevision); see 'kubectl nettune revisions PROFILE'")
				return func(ctx context.Context, pos []string) error { return c.undo(ctx, pos[0], *to) }
			},
		},
		{
			name: "exclude", args: "PROFILE VEHICLE...", minArgs: 2, maxArgs: -1,
			summary:  "keep vehicles on the stable revision (annotation nettune.io/exclude)",
			examples: []string{"kubectl nettune exclude xavier-lan av-017 av-023"},
			flags: func(_ *flag.FlagSet, c *cli) func(context.Context, []string) error {
				return func(ctx context.Context, pos []string) error { return c.editExcluded(ctx, pos[0], pos[1:], true) }
			},
		},
		{
			name: "include", args: "PROFILE VEHICLE...", minArgs: 2, maxArgs: -1,
			summary:  "take excluded vehicles back into the rollout",
			examples: []string{"kubectl nettune include xavier-lan av-017"},
			flags: func(_ *flag.FlagSet, c *cli) func(context.Context, []string) error {
				return func(ctx context.Context, pos []string) error { return c.editExcluded(ctx, pos[0], pos[1:], false) }
			},
		},
		{
			name: "revisions", args: "PROFILE", minArgs: 1, maxArgs: 1,
			summary:  "list the profile's revision history (status.revisions)",
			examples: []string{"kubectl nettune revisions xavier-lan"},
			flags: func(_ *flag.FlagSet, c *cli) func(context.Context, []string) error {
				return func(ctx context.Context, pos []string) error { return c.revisions(ctx, pos[0]) }
			},
		},
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `kubectl nettune: watch and steer nettune rollouts (NetTuningProfile).

Usage:
  kubectl nettune COMMAND ARGS [flags]
  kubectl nettune help COMMAND

Commands:
`)
	cmds := commands()
	width := 0
	for _, c := range cmds {
		if n := len(c.name) + 1 + len(c.args); n > width {
			width = n
		}
	}
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.name+" "+c.args, c.summary)
	}
	fmt.Fprint(w, "\nExamples:\n")
	for _, c := range cmds {
		for _, e := range c.examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
	fmt.Fprintf(w, `
Flags of every command:
  --kubeconfig PATH   kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)
  --context NAME      kubeconfig context
  -n, --namespace NS  namespace of the controller's revisions (default %s)
`, defaultRevisionNamespace)
}

func commandUsage(w io.Writer, cmd command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "kubectl nettune %s %s: %s\n\nUsage:\n  kubectl nettune %s %s [flags]\n\nExamples:\n", cmd.name, cmd.args, cmd.summary, cmd.name, cmd.args)
	for _, e := range cmd.examples {
		fmt.Fprintf(w, "  %s\n", e)
	}
	fmt.Fprint(w, "\nFlags:\n")
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// runContext dispatches to a command; ctx ends --watch.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := &cli{stdout: stdout, stderr: stderr, namespace: defaultRevisionNamespace, now: time.Now}
	return c.main(ctx, args)
}

func (c *cli) main(ctx context.Context, args []string) int {
	// Connection flags may come before the command too.
	global := flag.NewFlagSet("kubectl nettune", flag.ContinueOnError)
	global.SetOutput(io.Discard)
	c.register(global)
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(c.stdout)
			return exitOK
		}
		fmt.Fprintf(c.stderr, "kubectl nettune: %v\n\n", err)
		usage(c.stderr)
		return exitUsage
	}
	args = global.Args()
	if len(args) == 0 {
		usage(c.stderr)
		return exitUsage
	}
	name, args := args[0], args[1:]
	help := false
	if name == "help" {
		if len(args) == 0 {
			usage(c.stdout)
			return exitOK
		}
		name, args, help = args[0], nil, true
	}
	var cmd *command
	for _, k := range commands() {
		if k.name == name {
			k := k
			cmd = &k
		}
	}
	if cmd == nil {
		fmt.Fprintf(c.stderr, "kubectl nettune: unknown command %q\n\n", name)
		usage(c.stderr)
		return exitUsage
	}
	fs := flag.NewFlagSet("kubectl nettune "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.register(fs)
	do := cmd.flags(fs, c)
	if help {
		commandUsage(c.stdout, *cmd, fs)
		return exitOK
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			commandUsage(c.stdout, *cmd, fs)
			return exitOK
		}
		fmt.Fprintf(c.stderr, "kubectl nettune %s: %v\n\n", cmd.name, err)
		commandUsage(c.stderr, *cmd, fs)
		return exitUsage
	}
	if len(pos) < cmd.minArgs || (cmd.maxArgs >= 0 && len(pos) > cmd.maxArgs) {
		fmt.Fprintf(c.stderr, "kubectl nettune %s: expected %s, got %d argument(s)%s\n\n", cmd.name, cmd.args, len(pos), listSuffix(pos))
		commandUsage(c.stderr, *cmd, fs)
		return exitUsage
	}
	if err := do(ctx, pos); err != nil {
		fmt.Fprintf(c.stderr, "kubectl nettune %s: %v\n", cmd.name, err)
		return exitError
	}
	return exitOK
}

func listSuffix(pos []string) string {
	if len(pos) == 0 {
		return ""
	}
	return ": " + strings.Join(pos, " ")
}

// parseInterspersed parses flags anywhere among the positional arguments
// (`status xavier-lan --watch`); "--" ends the flags.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// The flag package drops a "--" it stopped at: everything after it
		// is positional.
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// sortedUnique returns the sorted set of names.
func sortedUnique(names []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range names {
		if n = strings.TrimSpace(n); n != "" && !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}
