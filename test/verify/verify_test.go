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

// Package verify checks that `make verify` catches generated files that are
// stale or edited by hand, on a throwaway copy of the repository.
package verify

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nettune/nettune/internal/localcp"
)

// copyTree copies the files git tracks (as they are in the work tree) into
// dst, and links bin/ so the pinned tools are reused.
func copyTree(t *testing.T, root, dst string) {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "ls-files", "--cached").Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, f := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		src := filepath.Join(root, f)
		info, err := os.Stat(src)
		if err != nil || info.IsDir() {
			continue // deleted in the work tree
		}
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), data, info.Mode()); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, "bin"), filepath.Join(dst, "bin")); err != nil {
		t.Fatal(err)
	}
}

func runVerify(t *testing.T, dir string) (string, error) {
	t.Helper()
	cmd := exec.Command("make", "--no-print-directory", "verify")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestVerifyCatchesHandEdits(t *testing.T) {
	root, err := localcp.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "bin", "controller-gen")); err != nil {
		t.Fatalf("bin/controller-gen missing, run 'make tools': %v", err)
	}
	dir := t.TempDir()
	copyTree(t, root, dir)

	if out, err := runVerify(t, dir); err != nil {
		t.Fatalf("verify fails on an unedited tree: %v\n%s", err, out)
	}

	for _, tc := range []struct{ file, from, to string }{
		{"config/crd/bases/nettune.io_nettuningprofiles.yaml", "maximum: 65535", "maximum: 65536"},
		{"api/v1alpha1/zz_generated.deepcopy.go", "*out = *in", "*out = *in // edited"},
	} {
		path := filepath.Join(dir, tc.file)
		orig, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(orig), tc.from) {
			t.Fatalf("%s does not contain %q", tc.file, tc.from)
		}
		if err := os.WriteFile(path, []byte(strings.Replace(string(orig), tc.from, tc.to, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := runVerify(t, dir)
		if err == nil {
			t.Fatalf("verify passed after a hand edit of %s:\n%s", tc.file, out)
		}
		if !strings.Contains(out, "out of date or was edited by hand") {
			t.Errorf("verify output does not explain the failure:\n%s", out)
		}
		// verify leaves the tree as it found it (the hand edit stays for the user to see).
		after, _ := os.ReadFile(path)
		if !strings.Contains(string(after), tc.to) {
			t.Errorf("verify modified %s", tc.file)
		}
		if err := os.WriteFile(path, orig, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
