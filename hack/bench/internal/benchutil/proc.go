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

// Package benchutil holds what the benchmark programs share: /proc readers,
// the Prometheus text scrape and the kube-apiserver's request counts, the
// controller binary as a measured process, and small helpers.
package benchutil

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ClockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
const ClockTicks = 100

// Usage is a process's CPU time and memory from /proc.
type Usage struct {
	Ticks int64 // utime + stime, in clock ticks
	HWM   int64 // peak RSS (VmHWM), bytes
	RSS   int64 // current RSS (VmRSS), bytes
	// File is the part of RSS that is mapped files (RssFile: for a Go
	// binary its own text, rodata and pclntab, which the Go runtime's soft
	// memory limit does not count), bytes.
	File int64
}

// ReadProc reads pid's CPU time and memory.
func ReadProc(pid int) (Usage, error) {
	var u Usage
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, fmt.Errorf("reading /proc/%d/stat: %w", pid, err)
	}
	// The fields after the command name (which may hold spaces) start at
	// the state, field 3; utime and stime are fields 14 and 15.
	end := strings.LastIndexByte(string(stat), ')')
	if end < 0 {
		return u, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(stat)[end+1:])
	if len(f) < 13 {
		return u, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return u, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	u.Ticks = ut + st
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, fmt.Errorf("reading /proc/%d/status: %w", pid, err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) == 0 {
			continue
		}
		kb, err := strconv.ParseInt(fs[0], 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmHWM":
			u.HWM = kb << 10
		case "VmRSS":
			u.RSS = kb << 10
		case "RssFile":
			u.File = kb << 10
		}
	}
	return u, nil
}

// FindProcs returns the processes whose command line holds every one of
// words (e.g. the control plane's binaries by their data directories).
func FindProcs(words ...string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		all := true
		for _, w := range words {
			all = all && strings.Contains(string(cmd), w)
		}
		if all {
			out = append(out, pid)
		}
	}
	return out
}

// TicksOf sums the CPU ticks of pids (the ones gone count nothing).
func TicksOf(pids []int) int64 {
	var t int64
	for _, pid := range pids {
		if u, err := ReadProc(pid); err == nil {
			t += u.Ticks
		}
	}
	return t
}

// TicksDuration converts clock ticks to time.
func TicksDuration(t int64) time.Duration { return time.Duration(t) * time.Second / ClockTicks }

// Loadavg is the 1, 5 and 15 minute load averages ("" when unreadable).
func Loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// Busiest names the n processes using the most CPU right now (ps, over
// their lifetime), as "command (pcpu %)": what else the machine runs.
func Busiest(n int) string {
	out, err := exec.Command("ps", "-eo", "pcpu=,comm=", "--sort=-pcpu").Output()
	if err != nil {
		return ""
	}
	var parts []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() && len(parts) < n {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s (%s %%)", strings.Join(f[1:], " "), f[0]))
	}
	return strings.Join(parts, ", ")
}

// CPUModel is the first CPU's model name.
func CPUModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown model"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown model"
}

// KernelRelease is the running kernel's release ("unknown" when
// unreadable).
func KernelRelease() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}
