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

// Package deps checks that the deps step (hack/deps.sh, run by make demo,
// make test and CI) touches nothing of the user's: with a Prometheus of the
// user's running, and a process that is merely named prometheus, the step's
// install path runs to its end and both are still there.
package deps

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nettune/nettune/internal/localcp"
	"github.com/nettune/nettune/internal/procfs"
	"github.com/nettune/nettune/test/framework/testenv"
)

func TestDepsLeavesTheUsersPrometheus(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the deps step installs packages: run as root")
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		t.Skip("no apt-get: the deps step only says what is missing")
	}
	root, err := localcp.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}

	// The user's own Prometheus: the Debian binary on a port of its own,
	// scraping nothing.
	users := testenv.StartPrometheus(t)
	userPID := pidListening(t, users.URL)

	// A process that has nothing to do with Prometheus but its name.
	decoyDir := t.TempDir()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	decoyBin := filepath.Join(decoyDir, "prometheus")
	copyFile(t, sleep, decoyBin)
	decoy := exec.Command(decoyBin, "600")
	if err := decoy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = decoy.Process.Kill(); _ = decoy.Wait() })
	// exec.Cmd.Start may return before the child's execve has renamed it.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		p, err := procfs.Stat(decoy.Process.Pid)
		if err == nil && p.Comm == "prometheus" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the decoy's process name is %q (%v), not prometheus", p.Comm, err)
		}
	}

	// The install path, as on a machine without the package: apt-get
	// install (a no-op here, the package is there), then the step that stops
	// the daemon the package's install may have started.
	cmd := exec.Command(filepath.Join(root, "hack", "deps.sh"))
	cmd.Env = append(os.Environ(), "NETTUNE_DEPS_AS_MISSING=prometheus")
	out, err := cmd.CombinedOutput()
	t.Logf("hack/deps.sh:\n%s", out)
	if err != nil {
		t.Fatalf("hack/deps.sh: %v", err)
	}
	if !strings.Contains(string(out), "apt-get install") || !strings.Contains(string(out), "prometheus") {
		t.Fatalf("hack/deps.sh did not take the install path for prometheus:\n%s", out)
	}

	// Give a stop sent by the step time to land before looking.
	time.Sleep(2 * time.Second)
	if !procfs.Alive(userPID) {
		t.Errorf("the user's Prometheus (pid %d) is gone after the deps step", userPID)
	}
	if resp, err := http.Get(users.URL + "/-/ready"); err != nil {
		t.Errorf("the user's Prometheus stopped answering after the deps step: %v", err)
	} else {
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("the user's Prometheus answers /-/ready with %d after the deps step", resp.StatusCode)
		}
	}
	if !procfs.Alive(decoy.Process.Pid) {
		t.Errorf("the process named prometheus (pid %d) is gone after the deps step", decoy.Process.Pid)
	}
}

// pidListening finds the pid of the Prometheus serving url among the
// processes named prometheus, by its --web.listen-address.
func pidListening(t *testing.T, url string) int {
	t.Helper()
	addr := strings.TrimPrefix(url, "http://")
	procs, err := procfs.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		for _, a := range p.Cmdline {
			if strings.Contains(a, "--web.listen-address="+addr) {
				return p.Pid
			}
		}
	}
	t.Fatalf("no process serves %s", url)
	return 0
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
}
