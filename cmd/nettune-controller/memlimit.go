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
	"strconv"
	"strings"

	"github.com/go-logr/logr"
)

// memoryReserve is the part of the container's memory limit kept out of the
// Go runtime's soft limit: a fifth of it, at least memoryReserveMin. The
// runtime does not count the binary's mapped pages (text, rodata and the
// pclntab), which the container's limit does: 34 MiB resident (RssFile) at
// 30,000 nodes. With a tenth, at least 48 MiB (272 MiB of the chart's
// 320Mi), the RSS reached 303 MiB in a 30,000-node rollout, 17 MiB from the
// container being killed; the reserve also covers the heap's overshoot of a
// soft limit while the collector catches up.
func memoryReserve(limit int64) int64 {
	return max(limit/5, memoryReserveMin)
}

// memoryReserveMin is the least memoryReserve.
const memoryReserveMin = 64 << 20

// setMemoryLimit sets the Go runtime's soft memory limit to the container's
// memory limit (cgroup v2 memory.max, else cgroup v1
// memory.limit_in_bytes, under cgroupRoot) less memoryReserve, never under
// half the limit, unless GOMEMLIMIT is set or there is no limit. With the default GOGC=100 the heap grows to
// twice what is live before a collection, so a controller whose live heap is
// over half its limit is killed for memory it does not need; with the soft
// limit the collector runs more often as the heap nears it instead. It
// returns the limit set (0: none).
func setMemoryLimit(log logr.Logger, cgroupRoot string) int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	limit := cgroupMemoryLimit(cgroupRoot)
	if limit <= 0 {
		return 0
	}
	soft := max(limit-memoryReserve(limit), limit/2)
	debug.SetMemoryLimit(soft)
	log.Info("Go soft memory limit set from the container's memory limit (GOMEMLIMIT overrides it)",
		"containerLimitBytes", limit, "goMemLimitBytes", soft)
	return soft
}

// cgroupMemoryLimit is the memory limit of the cgroup mounted at root, in
// bytes (0: none, or unreadable).
func cgroupMemoryLimit(root string) int64 {
	for _, f := range []string{"memory.max", "memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			return 0
		}
		n, err := strconv.ParseInt(s, 10, 64)
		// cgroup v1 writes "no limit" as the largest page-aligned int64.
		if err != nil || n <= 0 || n >= 1<<62 {
			return 0
		}
		return n
	}
	return 0
}
