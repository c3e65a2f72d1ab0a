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

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// marker starts the lines /init writes for the host.
const marker = "NETTUNE-KERNELS "

// testLine is a test's (or subtest's, indented) result in -test.v output.
var testLine = regexp.MustCompile(`^(\s*)--- (PASS|FAIL|SKIP): (\S+) \(`)

// testResult is one test's or subtest's outcome.
type testResult struct {
	suite, name, status string
	top                 bool // a top-level test, not a subtest
}

// suiteResult is one test binary's exit.
type suiteResult struct {
	name    string
	exit    int
	seconds string
	panic   string // the binary's "panic: ..." line, e.g. a -test.timeout
}

// vmResult is what one VM's console said.
type vmResult struct {
	release, machine string
	booted           time.Duration // from qemu's start to /init's boot line
	elapsed          time.Duration
	suites           []suiteResult
	tests            []testResult
	done             bool  // /init reached its end
	err              error // qemu failed or the VM timed out
}

// counts are the top-level tests by status.
func (r *vmResult) counts() map[string]int {
	c := map[string]int{}
	for _, t := range r.tests {
		if t.top {
			c[t.status]++
		}
	}
	return c
}

// names lists the tests (and subtests) with the status.
func (r *vmResult) names(status string) []string {
	var n []string
	for _, t := range r.tests {
		if t.status == status {
			n = append(n, t.name)
		}
	}
	return n
}

// failed reports whether anything went wrong in the VM.
func (r *vmResult) failed() bool {
	if r.err != nil || !r.done || len(r.names("FAIL")) > 0 {
		return true
	}
	for _, s := range r.suites {
		if s.exit != 0 {
			return true
		}
	}
	return false
}

// console parses a VM's console, line by line.
type console struct {
	r       *vmResult
	start   time.Time
	suite   string // the running suite, "" between suites
	panic   string
	running bool // in the list of running tests after a panic
}

func (c *console) line(line string) {
	r := c.r
	if i := strings.Index(line, marker); i >= 0 {
		f := strings.Fields(line[i+len(marker):])
		kv := map[string]string{}
		for _, x := range f[1:] {
			if k, v, ok := strings.Cut(x, "="); ok {
				kv[k] = v
			}
		}
		switch f[0] {
		case "boot":
			r.release, r.machine, r.booted = kv["release"], kv["machine"], time.Since(c.start)
		case "start":
			c.suite, c.panic = kv["suite"], ""
		case "result":
			exit, err := strconv.Atoi(kv["exit"])
			if err != nil {
				exit = -1
			}
			r.suites = append(r.suites, suiteResult{name: kv["suite"], exit: exit, seconds: kv["seconds"], panic: c.panic})
			c.suite = ""
		case "done":
			r.done = true
		}
		return
	}
	if c.suite == "" {
		return
	}
	switch m := testLine.FindStringSubmatch(line); {
	case m != nil:
		r.tests = append(r.tests, testResult{suite: c.suite, name: m[3], status: m[2], top: m[1] == ""})
	case strings.HasPrefix(line, "panic: ") && c.panic == "":
		c.panic = line
	case c.panic != "" && line == "\trunning tests:":
		c.running = true
	case c.running && strings.HasPrefix(line, "\t\t"):
		// A test the panic (a -test.timeout) cut short.
		name := strings.Fields(line)[0]
		r.tests = append(r.tests, testResult{suite: c.suite, name: name, status: "FAIL", top: !strings.Contains(name, "/")})
	default:
		c.running = false
	}
}

// bootVM boots the kernel with the initrd under qemu (TCG), streams the
// console to logFile and parses it, until the VM powers off or timeout.
func bootVM(ctx context.Context, k kernel, vmlinuz, initrd, logFile string, timeout time.Duration) *vmResult {
	r := &vmResult{}
	start := time.Now()
	defer func() { r.elapsed = time.Since(start) }()
	log, err := os.Create(logFile)
	if err != nil {
		r.err = fmt.Errorf("console log: %w", err)
		return r
	}
	defer log.Close()

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	args := append(append([]string{}, k.qemu[1:]...),
		"-accel", "tcg", "-m", "1024", "-smp", "1",
		"-kernel", vmlinuz, "-initrd", initrd,
		"-append", "console="+k.console+" panic=-1 quiet",
		"-nodefaults", "-no-user-config", "-display", "none", "-monitor", "none", "-serial", "stdio", "-no-reboot")
	cmd := exec.CommandContext(ctx, k.qemu[0], args...)
	fmt.Fprintf(log, "# %s\n", strings.Join(cmd.Args, " "))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		r.err = fmt.Errorf("qemu: %w", err)
		return r
	}
	if err := cmd.Start(); err != nil {
		r.err = fmt.Errorf("starting %s: %w", k.qemu[0], err)
		return r
	}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	c := &console{r: r, start: start}
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		fmt.Fprintln(log, line)
		c.line(line)
	}
	err = cmd.Wait()
	if stderr.Len() > 0 {
		fmt.Fprintf(log, "# qemu stderr:\n%s", stderr.String())
	}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		r.err = fmt.Errorf("timed out after %s", timeout)
	case err != nil:
		r.err = fmt.Errorf("%s: %w: %s", k.qemu[0], err, strings.TrimSpace(stderr.String()))
	case !r.done:
		r.err = errors.New("the VM stopped before /init's end")
	}
	return r
}
