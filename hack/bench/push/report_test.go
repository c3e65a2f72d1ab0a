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
	"testing"
	"time"
)

func TestStats(t *testing.T) {
	if got := median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("median odd = %v, want 2", got)
	}
	if got := median([]float64{4, 1, 2, 3}); got != 2.5 {
		t.Errorf("median even = %v, want 2.5", got)
	}
	if got := stat([]float64{1.25, 3, 2}, 1); got != "2.0 (1.2–3.0)" {
		t.Errorf("stat = %q", got)
	}
	if got := signed([]float64{-1, 0.5, 2}, 1); got != "**+0.5** (-1.0 … +2.0)" {
		t.Errorf("signed = %q", got)
	}
	if got := stat(nil, 1); got != "–" {
		t.Errorf("stat(nil) = %q", got)
	}
}

// TestPairedDiffs: a difference row pairs the runs of one repetition and
// leaves out invalid runs.
func TestPairedDiffs(t *testing.T) {
	a, b := &variant{key: "A"}, &variant{key: "B"}
	run := func(v *variant, rep int, cpu time.Duration, problem string) *result {
		return &result{arch: "amd64", variant: v, rep: rep, UserCPU: cpu, Wall: time.Second, Added: 1000, problem: problem}
	}
	r := &report{variants: []*variant{a, b}, runs: []*result{
		run(a, 1, 10*time.Millisecond, ""), run(b, 1, 15*time.Millisecond, ""),
		run(a, 2, 20*time.Millisecond, ""), run(b, 2, 21*time.Millisecond, ""),
		run(a, 3, 10*time.Millisecond, ""), run(b, 3, 90*time.Millisecond, "lost lines"),
	}}
	d := r.diffs("amd64", "B", "A", metricByName("CPU per 1,000 lines"))
	if len(d) != 2 || d[0] < 4.99 || d[0] > 5.01 || d[1] < 0.99 || d[1] > 1.01 {
		t.Errorf("diffs = %v, want [5 1]", d)
	}
	if r.invalid() != 1 {
		t.Errorf("invalid = %d, want 1", r.invalid())
	}
}

func TestAgentArm64RSS(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	doc := "| where | arch |\n" +
		"| bullseye-5.10-arm64 | arm64 | 5.10.0-32-arm64 | **32.4 MiB** | 10.0 MiB |\n" +
		"| bullseye-5.10-arm64 (before) | arm64 | 5.10.0-32-arm64 | **38.0 MiB** | 14.9 MiB |\n"
	if err := os.WriteFile(filepath.Join(root, "docs", "bench-agent.md"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, ok := agentArm64RSS(root); !ok || got != 32.4 {
		t.Errorf("agentArm64RSS = %v, %v; want 32.4", got, ok)
	}
}
