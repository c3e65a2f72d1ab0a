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

// Package localcp starts a real local Kubernetes control plane (etcd and
// kube-apiserver built from source into bin/) with nettune's CRDs installed.
// It backs the demo and every envtest suite.
package localcp

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/nettune/nettune/internal/scheme"
)

// startTimeout bounds the start of etcd and of kube-apiserver each:
// KUBEBUILDER_CONTROLPLANE_START_TIMEOUT when set, else 2 minutes.
func startTimeout() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT")); err == nil && d > 0 {
		return d
	}
	return 2 * time.Minute
}

// ControlPlane is a running etcd + kube-apiserver with the nettune CRDs.
type ControlPlane struct {
	Env        *envtest.Environment
	Config     *rest.Config
	Client     client.Client
	Scheme     *runtime.Scheme
	Kubeconfig string // path of an admin kubeconfig for kubectl

	tempDir  string        // the state directory Start made itself; Stop removes it
	release  chan struct{} // closed by Stop: ends the thread that forked etcd and kube-apiserver (DieWithProcess)
	stopOnce sync.Once
}

// Options configure StartWith.
type Options struct {
	// StateDir receives the admin kubeconfig (a temporary directory, removed
	// by Stop, when empty).
	StateDir string
	// DieWithProcess makes etcd and kube-apiserver die with this process,
	// however it ends (kill -9 included), as the other services of the
	// fleet and the demo do: they are started through util-linux's
	// `setpriv --pdeathsig KILL` (envtest sets no parent-death signal
	// itself), forked from an OS thread locked until Stop, since the kernel
	// sends the signal when the forking thread ends, not the process.
	// Without setpriv they are started as by Start.
	DieWithProcess bool
	// EtcdFlags are more etcd flags, name (without --) to value, e.g.
	// max-request-bytes.
	EtcdFlags map[string]string
}

// RepoRoot finds the repository root (the directory holding go.mod) from the
// working directory upwards, so tests in any package find bin/ and config/.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("getting working directory: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "api", "v1alpha1")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("repository root (go.mod with api/v1alpha1) not found above the working directory")
		}
		dir = parent
	}
}

// Scheme returns a scheme with the core Kubernetes types and nettune's.
func Scheme() (*runtime.Scheme, error) { return scheme.New() }

// Start starts etcd and kube-apiserver from <root>/bin (or KUBEBUILDER_ASSETS),
// installs the CRDs from <root>/config/crd/bases and writes an admin
// kubeconfig into stateDir (a temporary directory, removed by Stop, when
// empty).
func Start(stateDir string) (*ControlPlane, error) {
	return StartWith(Options{StateDir: stateDir})
}

// StartWith is Start with options.
func StartWith(o Options) (_ *ControlPlane, err error) {
	stateDir := o.StateDir
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(root, "bin")
	}
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(assets, b)); err != nil {
			return nil, fmt.Errorf("%s not found in %s: run 'make tools' first: %w", b, assets, err)
		}
	}
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
		Scheme:                scheme,
		// envtest's 20 s is not enough for kube-apiserver to come up on two
		// cores that other work keeps busy (seen at load average 37);
		// KUBEBUILDER_CONTROLPLANE_START_TIMEOUT still overrides it.
		ControlPlaneStartTimeout: startTimeout(),
	}
	cp := &ControlPlane{Env: env, Scheme: scheme}
	if stateDir == "" {
		if stateDir, err = os.MkdirTemp("", "nettune-cp-"); err != nil {
			return nil, fmt.Errorf("creating state directory: %w", err)
		}
		cp.tempDir = stateDir
	}
	defer func() {
		if err != nil && cp.tempDir != "" {
			_ = os.RemoveAll(cp.tempDir)
		}
	}()
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating state directory: %w", err)
	}
	start := env.Start
	if o.DieWithProcess {
		if start, err = cp.dieWithProcess(assets, stateDir); err != nil {
			return nil, err
		}
	}
	if len(o.EtcdFlags) > 0 {
		if env.ControlPlane.Etcd == nil {
			env.ControlPlane.Etcd = &envtest.Etcd{}
		}
		for k, v := range o.EtcdFlags {
			env.ControlPlane.Etcd.Configure().Set(k, v)
		}
	}
	cfg, err := start()
	if err != nil {
		cp.releaseThread()
		return nil, fmt.Errorf("starting etcd and kube-apiserver: %w", err)
	}
	cp.Config = cfg
	if cp.Client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		_ = cp.Stop()
		return nil, fmt.Errorf("creating client: %w", err)
	}
	user, err := env.AddUser(envtest.User{Name: "nettune-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		_ = cp.Stop()
		return nil, fmt.Errorf("adding admin user: %w", err)
	}
	kc, err := user.KubeConfig()
	if err != nil {
		_ = cp.Stop()
		return nil, fmt.Errorf("rendering kubeconfig: %w", err)
	}
	cp.Kubeconfig = filepath.Join(stateDir, "kubeconfig")
	if err := os.WriteFile(cp.Kubeconfig, kc, 0o600); err != nil {
		_ = cp.Stop()
		return nil, fmt.Errorf("writing kubeconfig: %w", err)
	}
	return cp, nil
}

// dieWithProcess points envtest at wrappers (in stateDir/bin) that exec
// etcd and kube-apiserver under `setpriv --pdeathsig KILL`, and returns the
// start to call instead of env.Start: on an OS thread locked until Stop.
func (cp *ControlPlane) dieWithProcess(assets, stateDir string) (func() (*rest.Config, error), error) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		return cp.Env.Start, nil
	}
	dir := filepath.Join(stateDir, "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	wrap := func(name string) (string, error) {
		path := filepath.Join(dir, name)
		script := fmt.Sprintf("#!/bin/sh\nexec %s --pdeathsig KILL -- %s \"$@\"\n", shellQuote(setpriv), shellQuote(filepath.Join(assets, name)))
		return path, os.WriteFile(path, []byte(script), 0o755)
	}
	etcd, err := wrap("etcd")
	if err != nil {
		return nil, err
	}
	apiserver, err := wrap("kube-apiserver")
	if err != nil {
		return nil, err
	}
	cp.Env.ControlPlane.Etcd = &envtest.Etcd{Path: etcd}
	cp.Env.ControlPlane.APIServer = &envtest.APIServer{Path: apiserver}
	cp.release = make(chan struct{})
	return func() (*rest.Config, error) {
		type result struct {
			cfg *rest.Config
			err error
		}
		done := make(chan result, 1)
		go func() {
			// Never unlocked: the thread ends with this goroutine, once Stop
			// has stopped etcd and kube-apiserver (or they failed to start).
			goruntime.LockOSThread()
			cfg, err := cp.Env.Start()
			done <- result{cfg, err}
			<-cp.release
		}()
		r := <-done
		return r.cfg, r.err
	}, nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func (cp *ControlPlane) releaseThread() {
	cp.stopOnce.Do(func() {
		if cp.release != nil {
			close(cp.release)
		}
	})
}

// Stop stops kube-apiserver and etcd and removes their data (and the state
// directory when Start made it).
func (cp *ControlPlane) Stop() error {
	if cp == nil || cp.Env == nil {
		return nil
	}
	err := cp.Env.Stop()
	cp.releaseThread()
	if cp.tempDir != "" {
		_ = os.RemoveAll(cp.tempDir)
	}
	if err != nil {
		return fmt.Errorf("stopping control plane: %w", err)
	}
	return nil
}
