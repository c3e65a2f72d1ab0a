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

package hubtest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a long-running child process with its output appended to a log
// file. A supervised proc is started again when it exits, as a kubelet
// restarts a pod's container: after 1 s, doubling up to maxBackoff.
//
// Children get SIGKILL when the thread that forked them ends (Pdeathsig), so
// a test binary that dies leaves none behind; each child is forked from a
// goroutine locked to its thread for as long as the proc lives.
type proc struct {
	name      string
	bin       string
	args      []string
	logPath   string
	supervise bool

	mu       sync.Mutex
	cmd      *exec.Cmd
	exited   chan struct{} // closed when the current child has been reaped
	waitErr  error
	restarts int
	stopping bool
	stopCh   chan struct{} // closed by stop
	done     chan struct{} // closed when the supervising goroutine has ended
}

// maxBackoff bounds the pause before a supervised proc is started again.
const maxBackoff = 4 * time.Second

// startProc starts bin and, when supervise is set, keeps it running until stop.
func startProc(name, bin string, args []string, logPath string, supervise bool) (*proc, error) {
	p := &proc{name: name, bin: bin, args: args, logPath: logPath, supervise: supervise, stopCh: make(chan struct{}), done: make(chan struct{})}
	started := make(chan error, 1)
	go p.run(started)
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

func (p *proc) run(started chan<- error) {
	// Never unlocked: the thread ends with this goroutine, after the children.
	runtime.LockOSThread()
	defer close(p.done)
	backoff := time.Second
	for first := true; ; first = false {
		err := p.startOnce(!first)
		if first {
			started <- err
		}
		if err != nil {
			return
		}
		p.mu.Lock()
		exited := p.exited
		p.mu.Unlock()
		begun := time.Now()
		<-exited
		if !p.supervise {
			return
		}
		if time.Since(begun) > time.Minute {
			backoff = time.Second
		}
		select {
		case <-p.stopCh:
			return
		case <-time.After(backoff):
		}
		if backoff *= 2; backoff > maxBackoff {
			backoff = maxBackoff
		}
	}
}

// errStopped is startOnce's answer once stop was called.
var errStopped = errors.New("stopped")

// startOnce starts one child unless the proc is being stopped; the check and
// the start happen under the lock, so stop always sees the child it must end.
func (p *proc) startOnce(restart bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopping {
		return errStopped
	}
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening %s log: %w", p.name, err)
	}
	fmt.Fprintf(logFile, "==== %s: starting %s %s\n", time.Now().Format(time.RFC3339Nano), p.bin, strings.Join(p.args, " "))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("starting %s (%s): %w", p.name, p.bin, err)
	}
	if restart {
		p.restarts++
	}
	exited := make(chan struct{})
	p.cmd, p.exited = cmd, exited
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(logFile, "==== %s: %s exited: %v\n", time.Now().Format(time.RFC3339Nano), p.name, err)
		_ = logFile.Close()
		p.mu.Lock()
		p.waitErr = err
		p.mu.Unlock()
		close(exited)
	}()
	return nil
}

// running reports whether the current child is alive.
func (p *proc) running() bool {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	if exited == nil {
		return false
	}
	select {
	case <-exited:
		return false
	default:
		return true
	}
}

// exitErr says how an unsupervised proc ended, nil while it runs.
func (p *proc) exitErr() error {
	if p.running() || p.supervise {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return fmt.Errorf("%s exited (%v); last lines of %s:\n%s", p.name, p.waitErr, p.logPath, tailFile(p.logPath, 20))
}

// restartCount is how many times a supervised proc was started again.
func (p *proc) restartCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.restarts
}

// stop ends the proc for good: SIGTERM to its process group, SIGKILL after
// grace.
func (p *proc) stop(grace time.Duration) {
	if p == nil {
		return
	}
	p.mu.Lock()
	if !p.stopping {
		p.stopping = true
		close(p.stopCh)
	}
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd != nil && cmd.Process != nil && exited != nil {
		select {
		case <-exited:
		default:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(grace):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-exited
			}
		}
	}
	select {
	case <-p.done:
	case <-time.After(maxBackoff + 5*time.Second):
	}
}

// tailFile returns the last n lines of a file.
func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer func() { _ = f.Close() }()
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
