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
// PATH (or install it with krew, plugins/krew/nettune.yaml) and run
// `kubectl nettune ...`. It takes every standard kubectl connection flag
// (--kubeconfig, --context, --server, --as, --request-timeout, ...) and acts
// on a NetTuningProfile's rollout through the same objects the controller
// reads: spec.rollout.paused, and the annotations nettune.io/promote,
// nettune.io/abort and nettune.io/exclude.
//
//	kubectl nettune status PROFILE [-w] [-o yaml|json|wide]
//	kubectl nettune promote|pause|resume|abort PROFILE
//	kubectl nettune undo PROFILE [--to-revision NAME]
//	kubectl nettune exclude|include PROFILE VEHICLE...
//	kubectl nettune revisions PROFILE [-o yaml|json]
//	kubectl nettune experiment status EXPERIMENT [-o yaml|json]
//	kubectl nettune experiment adopt EXPERIMENT [--hardware MODEL]
//	kubectl nettune recommend PROFILE --prometheus URL [--switch-buffer BYTES]
//	kubectl nettune completion bash|zsh|fish|powershell
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
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nettune/nettune/api/v1alpha1"
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

	flags *genericclioptions.ConfigFlags
	// namespace is where the controller's revisions (ControllerRevisions)
	// are: --namespace, else defaultRevisionNamespace.
	namespace string

	c   client.WithWatch
	now func() time.Time
}

// client connects to the API server once.
func (c *cli) client() (client.WithWatch, error) {
	if c.c != nil {
		return c.c, nil
	}
	cfg, err := c.flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.UserAgent = "kubectl-nettune"
	s, err := scheme.New()
	if err != nil {
		return nil, err
	}
	cl, err := client.NewWithWatch(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", cfg.Host, err)
	}
	c.c = cl
	return cl, nil
}

// usageError is a command line the plugin cannot run (exit status 2).
type usageError struct{ error }

// args checks the number of positional arguments, naming what is expected.
func args(want string, minArgs, maxArgs int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, pos []string) error {
		if len(pos) < minArgs || (maxArgs >= 0 && len(pos) > maxArgs) {
			got := ""
			if len(pos) > 0 {
				got = ": " + strings.Join(pos, " ")
			}
			return usageError{fmt.Errorf("expected %s, got %d argument(s)%s", want, len(pos), got)}
		}
		return nil
	}
}

// output is an -o/--output flag and the formats it allows.
type output struct {
	value   string
	formats []string
}

// outputFlag adds -o/--output with the formats allowed.
func outputFlag(fs *pflag.FlagSet, formats ...string) *output {
	o := &output{formats: formats}
	fs.StringVarP(&o.value, "output", "o", "", "output format: one of "+strings.Join(formats, "|")+" (default: the table view)")
	return o
}

// get is the format asked for ("" for the table view), or a usage error.
func (o *output) get() (string, error) {
	if o.value == "" || slices.Contains(o.formats, o.value) {
		return o.value, nil
	}
	return "", usageError{fmt.Errorf("unknown output format %q: use one of %s", o.value, strings.Join(o.formats, ", "))}
}

// newRoot builds the command tree; ctx ends --watch.
func (c *cli) newRoot(ctx context.Context) *cobra.Command {
	root := &cobra.Command{
		Use:   "kubectl-nettune",
		Short: "Watch and steer nettune rollouts (NetTuningProfile)",
		Long: `kubectl nettune: watch and steer nettune rollouts (NetTuningProfile).

It changes only what the controller reads: spec.rollout.paused and the
annotations nettune.io/promote, nettune.io/abort and nettune.io/exclude.`,
		Annotations:       map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl nettune"},
		SilenceUsage:      true,
		SilenceErrors:     true,
		CompletionOptions: cobra.CompletionOptions{HiddenDefaultCmd: false},
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			if f := cmd.Flags().Lookup("namespace"); f != nil && f.Changed && f.Value.String() != "" {
				c.namespace = f.Value.String()
			}
		},
	}
	root.SetOut(c.stdout)
	root.SetErr(c.stderr)
	root.SetContext(ctx)
	c.flags.AddFlags(root.PersistentFlags())
	if f := root.PersistentFlags().Lookup("namespace"); f != nil {
		f.Usage = "namespace of the controller's revisions (ControllerRevisions; default " + defaultRevisionNamespace + ")"
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })

	profileArg := c.completeProfiles
	one := func(use, short, example string, do func(ctx context.Context, name string) error) *cobra.Command {
		return &cobra.Command{
			Use: use + " PROFILE", Short: short, Example: example,
			Args:              args("PROFILE", 1, 1),
			ValidArgsFunction: profileArg,
			RunE:              func(cmd *cobra.Command, pos []string) error { return do(cmd.Context(), pos[0]) },
		}
	}

	status := &cobra.Command{
		Use:   "status PROFILE",
		Short: "Show the rollout: steps, analysis, conditions and every vehicle",
		Long: `Show the rollout: phase, revisions, steps ([x] done, [>] current, [ ] pending,
[!] where it was rolled back), the current step's analysis results, the True
conditions, and one row per vehicle (hardware, canary/baseline/excluded,
assigned revision, verified/total nodes, Verified/Updating/Deferred/Unreachable/Failed,
last heartbeat).

With -w it watches the profile and the NodeNetTunings on the API server and
prints the view again on every change (at most once per --min-interval).
-o yaml|json prints the same view as a document; -o wide adds each vehicle's
nodes.`,
		Example: `  kubectl nettune status xavier-lan
  kubectl nettune status xavier-lan -w
  kubectl nettune status xavier-lan -o yaml`,
		Args:              args("PROFILE", 1, 1),
		ValidArgsFunction: profileArg,
	}
	watch := status.Flags().BoolP("watch", "w", false, "after the first view, print it again whenever the profile or a NodeNetTuning changes, until interrupted")
	minInterval := status.Flags().Duration("min-interval", time.Second, "with --watch, the least time between two views")
	statusOut := outputFlag(status.Flags(), "yaml", "json", "wide")
	status.RunE = func(cmd *cobra.Command, pos []string) error {
		out, err := statusOut.get()
		if err != nil {
			return err
		}
		return c.status(cmd.Context(), pos[0], out, *watch, *minInterval)
	}

	undo := &cobra.Command{
		Use:   "undo PROFILE",
		Short: "Restore the profile's content from a stored revision (default: the stable one), keeping spec.rollout",
		Example: `  kubectl nettune undo xavier-lan
  kubectl nettune undo xavier-lan --to-revision xavier-lan-5f7c9d2a1b`,
		Args:              args("PROFILE", 1, 1),
		ValidArgsFunction: profileArg,
	}
	to := undo.Flags().String("to-revision", "", "revision to restore (default: status.stableRevision); see 'kubectl nettune revisions PROFILE'")
	undo.RunE = func(cmd *cobra.Command, pos []string) error { return c.undo(cmd.Context(), pos[0], *to) }

	vehicles := func(use, short, example string, exclude bool) *cobra.Command {
		return &cobra.Command{
			Use: use + " PROFILE VEHICLE...", Short: short, Example: example,
			Args:              args("PROFILE VEHICLE...", 2, -1),
			ValidArgsFunction: c.completeProfileThenVehicles,
			RunE: func(cmd *cobra.Command, pos []string) error {
				return c.editExcluded(cmd.Context(), pos[0], pos[1:], exclude)
			},
		}
	}

	revisions := &cobra.Command{
		Use:               "revisions PROFILE",
		Short:             "List the profile's revision history (status.revisions)",
		Example:           "  kubectl nettune revisions xavier-lan\n  kubectl nettune revisions xavier-lan -o json",
		Args:              args("PROFILE", 1, 1),
		ValidArgsFunction: profileArg,
	}
	revOut := outputFlag(revisions.Flags(), "yaml", "json")
	revisions.RunE = func(cmd *cobra.Command, pos []string) error {
		out, err := revOut.get()
		if err != nil {
			return err
		}
		return c.revisions(cmd.Context(), pos[0], out)
	}

	root.AddCommand(
		status,
		one("promote", "Skip the current pause (or analysis) step of the rollout in progress", "  kubectl nettune promote xavier-lan", c.promote),
		one("pause", "Hold the rollout at its current step (spec.rollout.paused=true)", "  kubectl nettune pause xavier-lan",
			func(ctx context.Context, name string) error { return c.setPaused(ctx, name, true) }),
		one("resume", "Let a paused rollout go on (spec.rollout.paused=false)", "  kubectl nettune resume xavier-lan",
			func(ctx context.Context, name string) error { return c.setPaused(ctx, name, false) }),
		one("abort", "Roll the revision in progress back: every vehicle returns to the stable revision", "  kubectl nettune abort xavier-lan", c.abort),
		undo,
		vehicles("exclude", "Keep vehicles on the stable revision (annotation nettune.io/exclude)", "  kubectl nettune exclude xavier-lan av-017 av-023", true),
		vehicles("include", "Take excluded vehicles back into the rollout", "  kubectl nettune include xavier-lan av-017", false),
		revisions,
		c.experimentCommand(),
		c.recommendCommand(),
		c.powerCommand(),
	)
	return root
}

// completeProfiles completes the first argument with the profiles' names.
func (c *cli) completeProfiles(cmd *cobra.Command, pos []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(pos) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return c.profileNames(cmd.Context()), cobra.ShellCompDirectiveNoFileComp
}

// completeProfileThenVehicles completes a profile, then the vehicles it
// selects.
func (c *cli) completeProfileThenVehicles(cmd *cobra.Command, pos []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(pos) == 0 {
		return c.profileNames(cmd.Context()), cobra.ShellCompDirectiveNoFileComp
	}
	p, err := c.getProfile(cmd.Context(), pos[0])
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	f, err := c.selectFleet(cmd.Context(), p)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	given := map[string]bool{}
	for _, v := range pos[1:] {
		given[v] = true
	}
	var out []string
	for v := range f.Vehicles {
		if !given[v] {
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out, cobra.ShellCompDirectiveNoFileComp
}

func (c *cli) profileNames(ctx context.Context) []string {
	cl, err := c.client()
	if err != nil {
		return nil
	}
	l := &v1alpha1.NetTuningProfileList{}
	if err := cl.List(ctx, l); err != nil {
		return nil
	}
	names := make([]string, 0, len(l.Items))
	for _, p := range l.Items {
		names = append(names, p.Name)
	}
	sort.Strings(names)
	return names
}

// runContext runs one command line; ctx ends --watch.
func runContext(ctx context.Context, argv []string, stdout, stderr io.Writer) int {
	c := &cli{stdout: stdout, stderr: stderr, namespace: defaultRevisionNamespace, now: time.Now,
		flags: genericclioptions.NewConfigFlags(true)}
	root := c.newRoot(ctx)
	root.SetArgs(argv)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	name := "kubectl nettune"
	if cmd != nil && cmd != root {
		name = strings.Replace(cmd.CommandPath(), root.Name(), name, 1)
	}
	var ue usageError
	switch {
	case errors.As(err, &ue), strings.HasPrefix(err.Error(), "unknown command"):
		fmt.Fprintf(stderr, "%s: %v\nSee '%s --help'.\n", name, err, name)
		return exitUsage
	default:
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return exitError
	}
}
