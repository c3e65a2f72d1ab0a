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

// Command nettune-agent is the nettune node agent. It applies the node's
// NodeNetTuning through netlink, verifies and probes it, keeps the
// last-known-good state on disk and reverts by itself when a change breaks
// the host. Without Kubernetes it applies a rendered node state from a file.
//
//	nettune-agent run --node NAME        watch NodeNetTuning NAME and apply it (default)
//	nettune-agent boot                   apply the last-known-good state and exit
//	nettune-agent apply -f node.yaml     apply a NodeNetTuning (or its spec) from a file
//	nettune-agent diff -f node.yaml      show what apply would change; exit 2 if anything
//	nettune-agent show                   show the tuned state of the host
//	nettune-agent revert                 return to the last-known-good state
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/vishvananda/netns"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/node-agent/agent"
	"github.com/nettune/nettune/node-agent/kernel"
	"github.com/nettune/nettune/node-agent/state"
)

// exitChanges is diff's exit code when apply would change something.
const exitChanges = 2

func main() {
	smallFootprint()
	code, err := run(os.Args[1:], os.Stdout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "nettune-agent: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

type common struct {
	stateDir   string
	sysctlRoot string
	netnsArg   string
	verbose    bool
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.stateDir, "state-dir", "/var/lib/nettune", "directory holding the last-known-good state and the apply journal")
	fs.StringVar(&c.sysctlRoot, "sysctl-root", kernel.DefaultSysctlRoot, "directory sysctls are read and written under; in a container whose /proc/sys is read-only, mount the host's /proc/sys/net writable at <dir>/net and pass <dir>")
	fs.StringVar(&c.netnsArg, "netns", "", "named network namespace (ip netns) to tune instead of the agent's own")
	fs.BoolVar(&c.verbose, "v", false, "verbose logs")
}

func (c *common) logger(out io.Writer) logr.Logger {
	verbosity := 0
	if c.verbose {
		verbosity = 1
	}
	return funcr.NewJSON(func(obj string) { fmt.Fprintln(os.Stderr, obj) }, funcr.Options{Verbosity: verbosity, LogTimestamp: true})
}

// engine opens the host and the state directory.
func (c *common) engine(log logr.Logger) (*agent.Engine, error) {
	var h *kernel.Handle
	var err error
	if c.netnsArg != "" {
		ns, nerr := netns.GetFromName(c.netnsArg)
		if nerr != nil {
			return nil, fmt.Errorf("opening network namespace %q: %w", c.netnsArg, nerr)
		}
		h, err = kernel.NewHandleAt(ns)
		ns.Close()
	} else {
		h, err = kernel.NewHandle()
	}
	if err != nil {
		return nil, err
	}
	h.SysctlRoot = c.sysctlRoot
	st, err := state.Open(c.stateDir)
	if err != nil {
		return nil, err
	}
	return &agent.Engine{Host: h, Store: st, Probes: agent.LocalProber{}, Log: log}, nil
}

func run(args []string, out io.Writer) (int, error) {
	cmd := "run"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	// `--boot` is accepted as a flag form of `boot`.
	for i, a := range args {
		if a == "--boot" || a == "-boot" {
			cmd, args = "boot", append(args[:i:i], args[i+1:]...)
			break
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var c common
	fs := flag.NewFlagSet("nettune-agent "+cmd, flag.ContinueOnError)
	fs.SetOutput(out)
	c.register(fs)
	switch cmd {
	case "run":
		var o runOptions
		o.register(fs)
		if err := fs.Parse(args); err != nil {
			return 1, err
		}
		return 0, runAgent(ctx, &c, &o, out)
	case "boot", "revert", "show":
		if err := fs.Parse(args); err != nil {
			return 1, err
		}
		e, err := c.engine(c.logger(out))
		if err != nil {
			return 1, err
		}
		if cmd == "show" {
			return 0, show(e, out)
		}
		o, err := e.Boot(ctx)
		if err != nil {
			return 1, err
		}
		return report(out, o)
	case "apply", "diff":
		file := fs.String("f", "", "NodeNetTuning manifest (or a bare spec) to apply")
		if err := fs.Parse(args); err != nil {
			return 1, err
		}
		if *file == "" {
			return 1, errors.New("-f FILE is required")
		}
		spec, err := readSpec(*file)
		if err != nil {
			return 1, err
		}
		e, err := c.engine(c.logger(out))
		if err != nil {
			return 1, err
		}
		if cmd == "diff" {
			return diff(e, spec, out)
		}
		o, err := e.Apply(ctx, spec)
		if err != nil {
			return 1, err
		}
		return report(out, o)
	default:
		return 1, fmt.Errorf("unknown command %q (run, boot, apply, diff, show, revert)", cmd)
	}
}

// readSpec reads a NodeNetTuning manifest or a bare NodeNetTuningSpec.
func readSpec(path string) (v1alpha1.NodeNetTuningSpec, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return v1alpha1.NodeNetTuningSpec{}, fmt.Errorf("reading %s: %w", path, err)
	}
	var obj v1alpha1.NodeNetTuning
	if err := yaml.UnmarshalStrict(raw, &obj); err == nil && obj.Kind == "NodeNetTuning" {
		return obj.Spec, nil
	}
	var spec v1alpha1.NodeNetTuningSpec
	if err := yaml.UnmarshalStrict(raw, &spec); err != nil {
		return spec, fmt.Errorf("%s is neither a NodeNetTuning nor a NodeNetTuningSpec: %w", path, err)
	}
	if spec.Revision == "" {
		return spec, fmt.Errorf("%s: spec.revision is required", path)
	}
	return spec, nil
}

// report prints an apply outcome; a refused or rolled-back apply exits 1.
func report(out io.Writer, o agent.Outcome) (int, error) {
	switch {
	case o.Committed:
		fmt.Fprintf(out, "applied revision %s in %s\n", o.Revision, o.Duration.Round(time.Microsecond))
		printItems(out, o.Items)
		return 0, nil
	case o.Refused:
		return 1, fmt.Errorf("%s", o.Reason)
	case o.RolledBack:
		printItems(out, o.Items)
		return 1, fmt.Errorf("rolled back to %q: %s", o.Revision, o.Reason)
	default:
		fmt.Fprintln(out, o.Reason)
		return 0, nil
	}
}

func printItems(out io.Writer, items []v1alpha1.ItemResult) {
	for _, it := range items {
		fmt.Fprintf(out, "  %-9s %-20s %-12s %s", it.Kind, it.Name, it.State, it.Observed)
		if it.Message != "" {
			fmt.Fprintf(out, "  (%s)", it.Message)
		}
		fmt.Fprintln(out)
	}
}

func show(e *agent.Engine, out io.Writer) error {
	spec, err := e.CommittedSpec()
	if err != nil {
		return err
	}
	if spec.Revision == "" {
		fmt.Fprintln(out, "no last-known-good state: nettune has not tuned this host")
		return nil
	}
	fmt.Fprintf(out, "last-known-good revision %s\n", spec.Revision)
	printItems(out, e.Observe(spec))
	return nil
}

// diff prints what apply would change and returns exitChanges if anything.
func diff(e *agent.Engine, spec v1alpha1.NodeNetTuningSpec, out io.Writer) (int, error) {
	if err := e.Preflight(spec); err != nil {
		return 1, fmt.Errorf("apply would be refused: %w", err)
	}
	changes := 0
	for _, it := range e.Observe(spec) {
		if it.State == agent.StateVerified || it.State == agent.StateNotEffective {
			continue
		}
		changes++
		fmt.Fprintf(out, "~ %s %s\n    - %s\n    + %s\n", it.Kind, it.Name, orNone(it.Observed), it.Desired)
	}
	if changes == 0 {
		fmt.Fprintln(out, "no changes")
		return 0, nil
	}
	fmt.Fprintf(out, "%d item(s) would change\n", changes)
	return exitChanges, nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
