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

package chart

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestImageSources checks what the Dockerfile's build stage needs without a
// container engine: every package of both binaries lies under a directory
// the Dockerfile copies, and the agent, which runs on every vehicle, builds
// static (CGO_ENABLED=0) for arm64, the Jetson vehicles' architecture. (The
// controller's arm64 build is left out: it compiles the same dependencies
// again, about 2 minutes on 2 cores, for little more evidence.)
func TestImageSources(t *testing.T) {
	r := root(t)
	f, err := os.Open(filepath.Join(r, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var copied []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 && fields[0] == "COPY" && strings.HasSuffix(fields[1], "/") {
			copied = append(copied, fields[1])
		}
	}
	if len(copied) == 0 {
		t.Fatal("no COPY of source directories in the Dockerfile")
	}
	const module = "github.com/nettune/nettune/"
	for _, bin := range []string{"nettune-controller", "nettune-agent"} {
		list := exec.Command("go", "list", "-deps", "./cmd/"+bin)
		list.Dir = r
		out, err := list.CombinedOutput()
		if err != nil {
			t.Fatalf("go list: %v\n%s", err, out)
		}
		for _, pkg := range strings.Fields(string(out)) {
			rel, ok := strings.CutPrefix(pkg, module)
			if !ok {
				continue
			}
			covered := false
			for _, c := range copied {
				if strings.HasPrefix(rel+"/", c) {
					covered = true
				}
			}
			if !covered {
				t.Errorf("%s needs %s, which the Dockerfile does not copy (copies %v)", bin, rel, copied)
			}
		}
		if bin != "nettune-agent" {
			continue
		}
		cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(t.TempDir(), bin), "./cmd/"+bin)
		cmd.Dir = r
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("static arm64 build of %s: %v\n%s", bin, err, out)
		}
	}
}
