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

package nettest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// CongestionModules names the congestion control algorithms the running
// kernel has as modules on disk (/lib/modules/RELEASE/kernel/net/ipv4/
// tcp_NAME.ko*, as Debian and NVIDIA L4T ship them): what a test expects
// the kernel to load on demand, learned without asking the kernel. A
// kernel without modules (or without the files) has none. Besides
// algorithms the list may hold tcp_diag's "diag": callers look up the
// algorithms they want.
func CongestionModules(t testing.TB) []string {
	t.Helper()
	release, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join("/lib/modules", strings.TrimSpace(string(release)), "kernel/net/ipv4/tcp_*.ko*"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		name := strings.TrimPrefix(filepath.Base(f), "tcp_")
		out = append(out, name[:strings.Index(name, ".ko")])
	}
	return out
}
