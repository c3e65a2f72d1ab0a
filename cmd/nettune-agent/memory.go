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
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"golang.org/x/sys/unix"
)

// gcPercent is the agent's GOGC unless the environment sets one: half of
// Go's default heap growth between collections.
const gcPercent = 50

// smallFootprint runs first in main. The agent runs on every compute unit
// of every vehicle and idles nearly all the time, so its resident memory
// matters more than its garbage collector's throughput
// (docs/bench-agent.md, "Footprint on amd64 and arm64"):
//
//   - No transparent huge pages. Debian's kernels, among others, default
//     THP to "always", which backs a region of the Go heap with a 2 MiB page
//     as soon as one byte of it is touched: 12-14 MiB of the agent's 15 MiB
//     of anonymous memory in the 5.10 VMs. The runtime has mapped its first
//     heap pages before main, so the agent disables THP for itself and
//     starts again (the setting is kept across exec, the process keeps its
//     PID); a kernel without the setting, or a failed exec, leaves it as it
//     is.
//   - GOGC=50 (unless GOGC is set): the heap between collections grows by
//     half of the live heap instead of all of it, about 2 MiB less RSS for
//     about a fifth more CPU in an apply.
//
// Neither changes what the agent does.
func smallFootprint() {
	if off, err := unix.PrctlRetInt(unix.PR_GET_THP_DISABLE, 0, 0, 0, 0); err == nil && off == 0 {
		if unix.Prctl(unix.PR_SET_THP_DISABLE, 1, 0, 0, 0) == nil {
			_ = unix.Exec("/proc/self/exe", os.Args, os.Environ())
		}
	}
	// An exec of /proc/self/exe names the process "exe" (ps, top,
	// /proc/<pid>/comm): it takes back its own name. Written through
	// /proc/self/comm, which is the main thread's whichever thread writes.
	if comm, err := os.ReadFile("/proc/self/comm"); err == nil && strings.TrimSpace(string(comm)) == "exe" {
		if name := filepath.Base(os.Args[0]); name != "exe" && name != "." && name != "/" {
			_ = os.WriteFile("/proc/self/comm", []byte(name), 0)
		}
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
}
