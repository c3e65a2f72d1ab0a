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

// Package stack runs, as local processes, the observability stack nettune
// works against: a single-binary Loki (bin/loki, built by `make tools`),
// Debian's Prometheus (/usr/bin/prometheus) and, as a user's stack puts in
// front of Loki, a TLS and basic-auth gateway (Debian's nginx). The demo
// (cmd/nettune-demo, through internal/fleet) runs it, and so do the tests
// (test/framework/testenv) and the benchmarks. Nothing here is a fake: what
// is pushed and scraped is real data, queried with real LogQL/PromQL.
//
// Every service runs on 127.0.0.1 on free ports with its state in a
// directory of the caller's, in its own process group; Close kills the
// group and leaves the directory. The service's output goes to a log file
// in that directory (LogTail).
package stack

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"time"
)

// logTailLines is how many lines of a service's log an error quotes.
const logTailLines = 50

// process is a service started by this package.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed once the process has exited and been reaped
	waitErr error         // valid after exited is closed
}

// startProcess starts bin in its own process group with stdout and stderr
// appended to logPath.
//
// The child gets SIGKILL if the process that started it dies (Pdeathsig),
// so a crashed or timed-out test or demo leaves nothing behind. Pdeathsig
// fires when the *thread* that forked the child exits, and Go may end
// threads (a goroutine that exits while locked to its thread, as
// network-namespace code does), so the fork happens on a thread locked for
// the child's whole life.
func startProcess(name, bin string, args []string, dir, logPath string) (*process, error) {
	return startProcessFlags(name, bin, args, dir, logPath, 0)
}

// startProcessFlags is startProcess with clone flags, e.g. CLONE_NEWPID:
// the process is then the init of a new PID namespace, and when it dies
// (Pdeathsig included) the kernel kills every process it started.
func startProcessFlags(name, bin string, args []string, dir, logPath string, cloneflags uintptr) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening %s log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Cloneflags: cloneflags}
	p := &process{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}

	started := make(chan error, 1)
	go func() {
		// Never unlocked: the thread ends with this goroutine, after the child.
		runtime.LockOSThread()
		defer close(p.exited)
		defer logFile.Close()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.waitErr = cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("starting %s (%s): %w", name, bin, err)
	}
	return p, nil
}

// running reports whether the process has not exited yet.
func (p *process) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop kills the whole process group and waits until the process is reaped.
// The state is thrown away, so there is nothing to shut down gracefully.
func (p *process) stop() {
	if p.running() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		// Cannot happen for SIGKILL short of a hung kernel; do not hang the caller.
	}
}

// logTail returns the last n lines of the process's log.
func (p *process) logTail(n int) string {
	return tailFile(p.logPath, n)
}

func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// freePorts returns n distinct TCP ports free on 127.0.0.1 right now. Another
// process can take one before the service binds it; callers retry on
// "address already in use".
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// errExited means the process exited before it became ready.
var errExited = errors.New("exited before becoming ready")

// waitReady polls url until it answers 200, the process exits or timeout passes.
func waitReady(p *process, url string, timeout time.Duration) error {
	return waitReadyWith(p, &http.Client{Timeout: 2 * time.Second}, url, nil, timeout)
}

// waitReadyWith is waitReady with client (e.g. one trusting the service's CA) and
// header (e.g. credentials) on every request.
func waitReadyWith(p *process, client *http.Client, url string, header http.Header, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for {
		if !p.running() {
			return fmt.Errorf("%s %w (%v)", p.name, errExited, p.waitErr)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		code, body, err := httpGetWith(ctx, client, url, header)
		cancel()
		if err == nil {
			if code == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("HTTP %d: %s", code, strings.TrimSpace(truncate(body)))
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready at %s after %v; last answer: %s", p.name, url, timeout, last)
		}
		select {
		case <-p.exited:
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// addrInUse reports whether the log says a listener could not bind.
func addrInUse(p *process) bool {
	b, err := os.ReadFile(p.logPath)
	return err == nil && bytes.Contains(bytes.ToLower(b), []byte("address already in use"))
}

// httpClient talks to the services; no request to them should take a minute.
var httpClient = &http.Client{Timeout: time.Minute}

// httpGetWith GETs url with client and header (e.g. credentials, a tenant)
// and returns the status code and body.
func httpGetWith(ctx context.Context, client *http.Client, url string, header http.Header) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// runInDir starts a service in an emptied dir, retrying on other ports when
// one was taken before the service bound it.
func runInDir[T any](name, dir string, launch func() (T, error)) (T, error) {
	for attempt := 1; ; attempt++ {
		var zero T
		if err := os.RemoveAll(dir); err != nil {
			return zero, err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return zero, err
		}
		v, err := launch()
		if err == nil {
			return v, nil
		}
		if !errors.Is(err, errRetry) || attempt >= startAttempts {
			return zero, fmt.Errorf("starting %s: %w", name, err)
		}
	}
}

// server is what Loki and Prometheus share: a directory holding the
// configuration, data and log, and the process.
type server struct {
	dir  string
	proc *process
}

// Close stops the process (its data stays in its directory).
func (s *server) Close() error {
	s.proc.stop()
	return nil
}

// Dir is the directory of the configuration, data and log.
func (s *server) Dir() string { return s.dir }

// Running reports whether the process has not exited.
func (s *server) Running() bool { return s.proc.running() }

// LogPath is the file the process's output goes to.
func (s *server) LogPath() string { return s.proc.logPath }

// LogTail is the last n lines of the process's log.
func (s *server) LogTail(n int) string { return s.proc.logTail(n) }
