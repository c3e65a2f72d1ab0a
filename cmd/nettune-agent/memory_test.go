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
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAgentRunsWithoutHugePages starts `nettune-agent run` (no API server:
// it boots and keeps retrying) and checks that the process, under the PID
// it was started with, has transparent huge pages disabled
// (smallFootprint) and keeps running.
func TestAgentRunsWithoutHugePages(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the agent's run needs root")
	}
	if !strings.Contains(readStatus(t, os.Getpid()), "THP_enabled:") {
		t.Skip("this kernel's /proc/PID/status has no THP_enabled (Linux 5.0 and later)")
	}
	bin := buildAgent(t)
	cmd := exec.Command(bin, "run", "--node", "thp-test", "--state-dir", filepath.Join(t.TempDir(), "state"),
		"--metrics-bind-address", "0", "--probe-port", "0")
	cmd.Env = agentEnv(t)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var status string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		status = readStatus(t, cmd.Process.Pid)
		if strings.Contains(status, "THP_enabled:\t0") {
			break
		}
	}
	if !strings.Contains(status, "THP_enabled:\t0") {
		t.Fatalf("the agent's process has transparent huge pages enabled:\n%s", status)
	}
	time.Sleep(time.Second)
	if s := readStatus(t, cmd.Process.Pid); !strings.Contains(s, "State:\tS") && !strings.Contains(s, "State:\tR") {
		t.Fatalf("the agent is not running:\n%s", s)
	}
}

func readStatus(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
