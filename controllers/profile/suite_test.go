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

package profile_test

import (
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/nettune/nettune/internal/localcp"
	"github.com/nettune/nettune/test/framework/envtest"
)

// TestMain runs the profile reconciler's tests (rollouts and their
// analyses and guards, conflicts, status writes) against one control plane
// for the package (test/framework/envtest), started by the first
// test and emptied after each.
func TestMain(m *testing.M) { os.Exit(envtest.Run(m)) }

// latencies draws n message latencies (ms): a 3-4 ms body, an exponential
// tail and 1 % of messages delayed a few ms more (p99.99 about 13 ms).
func latencies(rng *rand.Rand, n int, scale float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		v := 3 + rng.ExpFloat64()*0.8
		if rng.Float64() < 0.01 {
			v += 3 + rng.Float64()*3
		}
		out[i] = v * scale
	}
	return out
}

// kubectl runs bin/kubectl against the test's control plane.
func kubectl(t *testing.T, e *envtest.Fleet, args ...string) string {
	t.Helper()
	root, err := localcp.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(root, "bin", "kubectl"), append([]string{"--kubeconfig", e.CP.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return string(out)
}
