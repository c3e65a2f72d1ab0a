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

package benchutil

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"time"
)

// ControllerOptions are how StartController runs the controller binary.
type ControllerOptions struct {
	// Name is what messages call it ("controller" when empty).
	Name string
	// Bin is the binary, Kubeconfig its KUBECONFIG, LogPath the file its
	// output goes to.
	Bin, Kubeconfig, LogPath string
	// Args come before the metrics and health probe addresses, which
	// StartController picks.
	Args []string
	// Pprof serves /debug/pprof on a free port (Controller.PprofURL).
	Pprof bool
	// Env is added to this process's environment.
	Env []string
}

// Controller is a running bin/nettune-controller.
type Controller struct {
	PID        int
	MetricsURL string
	PprofURL   string // base of /debug/pprof ("" when not served)
	LogPath    string

	name    string
	cmd     *exec.Cmd
	log     *os.File
	exited  chan struct{}
	exitErr error
	stopped atomic.Bool
}

// StartController starts the controller binary, its metrics on a free
// port of 127.0.0.1, no health probes, its output into o.LogPath.
func StartController(o ControllerOptions) (*Controller, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	args := append(append([]string{}, o.Args...),
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", port), "--health-probe-bind-address", "0")
	pprofURL := ""
	if o.Pprof {
		pp, err := FreePort()
		if err != nil {
			return nil, err
		}
		args = append(args, "--pprof-bind-address", fmt.Sprintf("127.0.0.1:%d", pp))
		pprofURL = fmt.Sprintf("http://127.0.0.1:%d/debug/pprof", pp)
	}
	logf, err := os.Create(o.LogPath)
	if err != nil {
		return nil, fmt.Errorf("creating controller log: %w", err)
	}
	cmd := exec.Command(o.Bin, args...)
	cmd.Env = append(append(os.Environ(), o.Env...), "KUBECONFIG="+o.Kubeconfig)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s: %w", o.Bin, err)
	}
	name := o.Name
	if name == "" {
		name = "controller"
	}
	p := &Controller{PID: cmd.Process.Pid, MetricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", port), PprofURL: pprofURL,
		LogPath: o.LogPath, name: name, cmd: cmd, log: logf, exited: make(chan struct{})}
	go func() {
		p.exitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Alive returns an error when the controller has exited.
func (p *Controller) Alive() error {
	select {
	case <-p.exited:
		return fmt.Errorf("the controller exited (%v); its log: %s", p.exitErr, p.LogPath)
	default:
		return nil
	}
}

// Exited is closed when the controller has exited.
func (p *Controller) Exited() <-chan struct{} { return p.exited }

// WaitStarted waits until every one of controllers logged "Starting
// workers" (its caches synced) and the metrics endpoint answers.
func (p *Controller) WaitStarted(ctx context.Context, timeout time.Duration, controllers ...string) error {
	deadline := time.Now().Add(timeout)
	for {
		if err := p.Alive(); err != nil {
			return err
		}
		started, err := StartedControllers(p.LogPath)
		if err != nil {
			return err
		}
		missing := 0
		for _, c := range controllers {
			if !started[c] {
				missing++
			}
		}
		if missing == 0 {
			if _, err := Fetch(ctx, http.DefaultClient, p.MetricsURL); err == nil {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the %s did not start its workers within %s (log: %s)", p.name, timeout, p.LogPath)
		}
		if err := Sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// Stop ends the controller (SIGTERM, then SIGKILL after 15 s) and closes
// its log.
func (p *Controller) Stop() {
	defer p.log.Close()
	if p.Alive() != nil || !p.stopped.CompareAndSwap(false, true) {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// LogEntry is what is read of one controller log line (zap's JSON
// encoder).
type LogEntry struct {
	Level      string `json:"level"`
	Msg        string `json:"msg"`
	Error      string `json:"error"`
	Controller string `json:"controller"`
}

// IsError says whether the entry is logged at error level or above.
func (e LogEntry) IsError() bool {
	switch e.Level {
	case "error", "dpanic", "panic", "fatal":
		return true
	}
	return false
}

// ParseLogLine decodes a JSON log line.
func ParseLogLine(b []byte) (LogEntry, bool) {
	var e LogEntry
	if len(b) == 0 || b[0] != '{' {
		return e, false
	}
	if err := json.Unmarshal(b, &e); err != nil {
		return e, false
	}
	return e, true
}

// ScanLog calls fn with every line of a controller log and, for a JSON
// line, its entry (ok).
func ScanLog(path string, fn func(e LogEntry, ok bool)) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("reading controller log: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		fn(ParseLogLine(sc.Bytes()))
	}
	return sc.Err()
}

// StartedControllers reads which controllers logged "Starting workers".
func StartedControllers(path string) (map[string]bool, error) {
	out := map[string]bool{}
	err := ScanLog(path, func(e LogEntry, ok bool) {
		if ok && e.Msg == "Starting workers" {
			out[e.Controller] = true
		}
	})
	return out, err
}
