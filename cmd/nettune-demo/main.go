// Command nettune-demo runs nettune on its embedded default: a real local
// control plane (etcd + kube-apiserver built into bin/), the nettune CRDs, and
// the sample profiles applied with kubectl exactly as a user would.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nettune/nettune/internal/localcp"
)

func main() {
	if err := run(os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "nettune-demo: %v\n", err)
		os.Exit(1)
	}
}

type options struct {
	exit     bool
	stateDir string
	samples  string
}

func run(out io.Writer, args []string) error {
	root, err := localcp.RepoRoot()
	if err != nil {
		return err
	}
	var o options
	fs := flag.NewFlagSet("nettune-demo", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.BoolVar(&o.exit, "exit", false, "stop the control plane and exit after the walkthrough instead of waiting for Ctrl-C")
	fs.StringVar(&o.stateDir, "state-dir", filepath.Join(root, ".nettune"), "where the kubeconfig is written")
	fs.StringVar(&o.samples, "samples", filepath.Join(root, "config", "samples"), "directory of manifests to apply")
	if err := fs.Parse(args); err != nil {
		return err
	}

	step := newStepper(out)
	step.start("starting etcd and kube-apiserver (bin/), installing CRDs")
	cp, err := localcp.Start(o.stateDir)
	if err != nil {
		return err
	}
	defer func() {
		step.start("stopping the control plane")
		if err := cp.Stop(); err != nil {
			fmt.Fprintf(out, "  %v\n", err)
		}
		step.done()
	}()
	step.done()
	fmt.Fprintf(out, "  API server: %s\n  kubeconfig: %s\n", cp.Config.Host, cp.Kubeconfig)

	kubectl := func(args ...string) error {
		bin := filepath.Join(root, "bin", "kubectl")
		if _, err := os.Stat(bin); err != nil {
			bin = "kubectl"
		}
		fmt.Fprintf(out, "\n$ kubectl %s\n", strings.Join(args, " "))
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.Kubeconfig)
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("kubectl %s: %w", strings.Join(args, " "), err)
		}
		return nil
	}

	for _, args := range [][]string{
		{"apply", "-f", o.samples},
		{"get", "ntp,nnt"},
		{"explain", "ntp.spec.defaults.rtoMin"},
	} {
		if err := kubectl(args...); err != nil {
			return err
		}
	}

	fmt.Fprintf(out, "\nThe control plane is up. In another shell:\n  export KUBECONFIG=%s\n  kubectl get ntp,nnt\n", cp.Kubeconfig)
	if o.exit {
		return nil
	}
	fmt.Fprintln(out, "Press Ctrl-C to stop.")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	if !errors.Is(ctx.Err(), context.Canceled) {
		return ctx.Err()
	}
	return nil
}

// stepper prints "==> what ... (1.2s)" progress lines for long work.
type stepper struct {
	out   io.Writer
	began time.Time
}

func newStepper(out io.Writer) *stepper { return &stepper{out: out} }

func (s *stepper) start(what string) {
	s.began = time.Now()
	fmt.Fprintf(s.out, "==> %s\n", what)
}

func (s *stepper) done() {
	fmt.Fprintf(s.out, "    done in %s\n", time.Since(s.began).Round(100*time.Millisecond))
}
