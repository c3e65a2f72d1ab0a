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

package testnode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLogPauses(t *testing.T) {
	n := &Node{Options: Options{Dir: t.TempDir()}}
	if err := os.MkdirAll(n.Path("logs"), 0o755); err != nil {
		t.Fatal(err)
	}
	log := `E1128 09:30:06.000000    1 options.go:205] The manifest file is empty, ignoring.
I1128 09:30:06.500000    1 controllermanager.go:204] "Starting"
not a klog line
I1128 09:30:20.000000    1 a.go:1] "waited 13.5 s"
I1128 09:34:59.000000    1 b.go:1] "waited 279 s"
I1128 09:35:00.000000    1 c.go:1] "Caches are synced"
`
	if err := os.WriteFile(filepath.Join(n.Path("logs"), "kcm.log"), []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	got := n.logPauses("kcm", 10*time.Second, 3)
	if len(got) != 2 {
		t.Fatalf("got %d pauses, want 2: %q", len(got), got)
	}
	if !strings.HasPrefix(got[0], "4m39s between") || !strings.Contains(got[0], `"waited 279 s"`) || !strings.Contains(got[0], `"waited 13.5 s"`) {
		t.Errorf("longest pause: %q", got[0])
	}
	if !strings.HasPrefix(got[1], "13.5s between") || !strings.Contains(got[1], `"Starting"`) {
		t.Errorf("second pause: %q", got[1])
	}
	if got := n.logPauses("kcm", 10*time.Second, 1); len(got) != 1 {
		t.Errorf("most=1 gave %d", len(got))
	}
}
