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
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/go-logr/logr"
)

// TestSetMemoryLimit: a cgroup v2 or v1 limit less a fifth of it, at least
// 64 MiB (never under half), becomes the Go soft limit; no limit ("max",
// v1's largest value, no file) and a GOMEMLIMIT of the operator's own leave
// the runtime as it is.
func TestSetMemoryLimit(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	defer debug.SetMemoryLimit(math.MaxInt64)
	write := func(name, content string) string {
		root := t.TempDir()
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return root
	}
	for _, c := range []struct {
		name, file, content string
		want                int64
	}{
		{"v2", "memory.max", "536870912\n", 429496730},                    // 512 MiB less 102.4 MiB
		{"v2, the chart's limit", "memory.max", "335544320\n", 256 << 20}, // 320 MiB less 64 MiB
		{"v2, small", "memory.max", "67108864\n", 32 << 20},               // 64 MiB: half of it
		{"v2, 96 MiB", "memory.max", "100663296\n", 48 << 20},             // less 64 MiB would be under half
		{"v2 unlimited", "memory.max", "max\n", 0},
		{"v1", "memory/memory.limit_in_bytes", "402653184\n", 322122548}, // 384 MiB less 76.8 MiB
		{"v1 unlimited", "memory/memory.limit_in_bytes", "9223372036854771712\n", 0},
		{"garbage", "memory.max", "lots\n", 0},
	} {
		debug.SetMemoryLimit(math.MaxInt64)
		got := setMemoryLimit(logr.Discard(), write(c.file, c.content))
		if got != c.want {
			t.Errorf("%s: limit %d, want %d", c.name, got, c.want)
		}
		if want := c.want; want != 0 && debug.SetMemoryLimit(-1) != want {
			t.Errorf("%s: runtime limit %d, want %d", c.name, debug.SetMemoryLimit(-1), want)
		}
	}
	if got := setMemoryLimit(logr.Discard(), t.TempDir()); got != 0 {
		t.Errorf("no cgroup files: limit %d", got)
	}
	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetMemoryLimit(math.MaxInt64)
	if got := setMemoryLimit(logr.Discard(), write("memory.max", "536870912\n")); got != 0 || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Errorf("GOMEMLIMIT set: the cgroup's limit was applied (%d)", got)
	}
}
