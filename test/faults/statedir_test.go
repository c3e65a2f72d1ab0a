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

package faults

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/internal/fleet"
)

// run runs a command, failing the test on an error.
func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

// smallDisk moves a stopped agent's state directory onto a 1 MiB tmpfs
// mounted in its place; the test's end moves it back (the agent stopped).
func smallDisk(t *testing.T, node string) string {
	t.Helper()
	dir := f.AgentStateDir(node)
	saved := dir + ".saved"
	run(t, "cp", "-a", dir, saved)
	run(t, "mount", "-t", "tmpfs", "-o", "size=1m", "nettune-faults", dir)
	run(t, "cp", "-a", saved+"/.", dir)
	t.Cleanup(func() {
		if err := f.StopAgent(node); err != nil {
			t.Error(err)
		}
		_ = exec.Command("mount", "-o", "remount,rw", dir).Run()
		_ = os.Remove(filepath.Join(dir, "filler"))
		if err := os.RemoveAll(saved); err != nil {
			t.Error(err)
		}
		run(t, "cp", "-a", dir, saved)
		run(t, "umount", dir)
		run(t, "rm", "-rf", dir)
		run(t, "mv", saved, dir)
		if err := f.StartAgents(vehicleOf(node)); err != nil {
			t.Error(err)
		}
	})
	return dir
}

// agentUp waits until node's agent, started at or after since, serves its
// metrics and renewed its Lease.
func agentUp(t *testing.T, node string, since time.Time) {
	t.Helper()
	waitFor(t, time.Minute, node+"'s agent up (metrics served, Lease renewed)", func() bool {
		resp, err := http.Get("http://" + f.AgentMetrics(node) + "/metrics")
		if err != nil {
			return false
		}
		resp.Body.Close()
		l := &coordinationv1.Lease{}
		if err := f.CP.Client.Get(context.Background(), client.ObjectKey{Namespace: fleet.Namespace, Name: node}, l); err != nil {
			return false
		}
		return l.Spec.RenewTime != nil && !l.Spec.RenewTime.Time.Before(since.Truncate(time.Second))
	})
}

// fill writes a file into dir until the file system is full.
func fill(t *testing.T, dir string) {
	t.Helper()
	fh, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := fh.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling %s: %v", dir, err)
			}
			return
		}
	}
}

func vehicleOf(node string) string {
	for _, v := range vehicles {
		if strings.HasPrefix(node, v+"-") {
			return v
		}
	}
	return ""
}

// getNode reads a node's NodeNetTuning.
func getNode(t *testing.T, node string) *v1alpha1.NodeNetTuning {
	t.Helper()
	n := &v1alpha1.NodeNetTuning{}
	if err := f.CP.Client.Get(context.Background(), client.ObjectKey{Name: node}, n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestAgentStateDirectory: an agent whose state directory is full or
// read-only changes nothing on its host for a new revision and says why in
// its status; once the directory is writable again it applies without a new
// edit. An agent that restarts with a truncated last-known-good file boots
// and converges.
func TestAgentStateDirectory(t *testing.T) {
	for i, mode := range []string{"full", "read-only"} {
		t.Run(mode, func(t *testing.T) {
			name := "fault-state-" + strings.ReplaceAll(mode, "-", "")
			base := int32(20 + 2*i)
			node := fleet.NodeName("av-001", "xavier-c")
			var outcome, conv string
			record(t, "one agent's state directory "+mode+" when a new revision arrives",
				"hosts sampled throughout; that host's routes stay on the previous revision while the other eight move; its status says Applied=False naming the directory's error; once writable it applies without a new edit; every node verifies the new revision",
				func() (string, string) { return outcome, conv })
			r1 := start(t, name, base)
			if err := f.StopAgent(node); err != nil {
				t.Fatal(err)
			}
			dir := smallDisk(t, node)
			restarted := time.Now()
			if err := f.StartAgents("av-001"); err != nil {
				t.Fatal(err)
			}
			// The fault lands on a running agent, not on its start: a
			// remount racing the agent's boot tested the boot instead (and
			// once, in CI, never saw the agent report).
			agentUp(t, node, restarted)
			if mode == "full" {
				fill(t, dir)
			} else {
				run(t, "mount", "-o", "remount,ro", dir)
			}
			watchHosts(t)
			put(t, name, spec(base+1, allAtOnce()))
			var reason, message string
			waitFor(t, 2*time.Minute, node+" reports why it cannot apply", func() bool {
				n := getNode(t, node)
				c := meta.FindStatusCondition(n.Status.Conditions, v1alpha1.ConditionApplied)
				if c == nil || c.ObservedGeneration != n.Generation || c.Status != "False" {
					return false
				}
				reason, message = c.Reason, c.Message
				return true
			})
			t.Logf("%s: Applied=False %s: %s", node, reason, message)
			want := map[string]string{"full": "no space left on device", "read-only": "read-only file system"}[mode]
			if !strings.Contains(message, want) || !strings.Contains(message, dir) {
				t.Errorf("Applied=False message %q: want the directory %s and %q", message, dir, want)
			}
			time.Sleep(3 * time.Second) // more than one retry
			if rs, err := kernelRoutes("av-001", "xavier-c"); err != nil {
				t.Fatal(err)
			} else {
				for dst, sig := range rs {
					if !strings.Contains(sig, fmt.Sprintf("ssthresh lock %d", base)) {
						t.Errorf("%s: route %s %q changed while the agent could not record it", node, dst, sig)
					}
				}
			}
			if mode == "full" {
				if err := os.Remove(filepath.Join(dir, "filler")); err != nil {
					t.Fatal(err)
				}
			} else {
				run(t, "mount", "-o", "remount,rw", dir)
			}
			cleared := time.Now()
			r2 := healthy(t, name, 2*time.Minute)
			waitFor(t, time.Minute, "every node on "+r2, func() bool { return converged(t, name, r2, base+1) })
			_ = r1
			conv = round(time.Since(cleared)) + " after the directory was writable"
			outcome = fmt.Sprintf("nothing changed on the host; Applied=False %s (%s); applied once writable", reason, message)
		})
	}

	t.Run("truncated last-known-good", func(t *testing.T) {
		const name = "fault-state-truncated"
		node := fleet.NodeName("av-002", "xavier-c")
		var outcome, conv string
		record(t, "an agent restarts (routes flushed) with its last-known-good file truncated to half",
			"hosts sampled throughout; the agent boots and reports it; the host converges on the profile's revision; every node verifies it",
			func() (string, string) { return outcome, conv })
		r1 := start(t, name, 27)
		watchHosts(t)
		if err := f.StopAgent(node); err != nil {
			t.Fatal(err)
		}
		lkg := filepath.Join(f.AgentStateDir(node), "last-known-good.json")
		st, err := os.Stat(lkg)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(lkg, st.Size()/2); err != nil {
			t.Fatal(err)
		}
		flushRoutes(t, "av-002", "xavier-c")
		began := time.Now()
		if err := f.StartAgents("av-002"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, time.Minute, "every node on "+r1, func() bool { return converged(t, name, r1, 27) })
		conv = round(time.Since(began)) + " from the restart"
		matches, _ := filepath.Glob(filepath.Join(f.AgentStateDir(node), "last-known-good.json.corrupt*"))
		if len(matches) == 0 {
			t.Errorf("the truncated file was not kept aside (last-known-good.json.corrupt*)")
		}
		outcome = fmt.Sprintf("booted; the truncated file kept aside as %s; converged", filepath.Base(strings.Join(matches, ",")))
	})
}
