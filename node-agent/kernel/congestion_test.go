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

package kernel

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nettune/nettune/test/framework/nettest"
)

// TestLoadCongestionControl: names that cannot be algorithms are refused
// before the kernel is asked; a loaded algorithm is there; one no kernel has
// fails with ENOENT; and where the kernel has an algorithm as a module that
// is not loaded yet (Debian's and L4T's kernels, not a kernel without
// modules), asking for it loads it.
func TestLoadCongestionControl(t *testing.T) {
	ns := newTestNS(t)
	for _, bad := range []string{"", "../../x", "a b", "reno\x00", strings.Repeat("x", 16)} {
		if err := ns.h.LoadCongestionControl(bad); err == nil || errors.Is(err, unix.ENOENT) {
			t.Errorf("name %q: %v, want refused before the kernel is asked", bad, err)
		}
	}
	if err := ns.h.LoadCongestionControl("reno"); err != nil {
		t.Errorf("reno: %v", err)
	}
	err := ns.h.LoadCongestionControl("nosuch")
	if !errors.Is(err, unix.ENOENT) || !strings.Contains(err.Error(), `"nosuch"`) {
		t.Errorf("nosuch: %v, want ENOENT naming it", err)
	}
	avail, err := ns.h.AvailableCongestionControls()
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(avail, "nosuch") {
		t.Errorf("nosuch listed: %v", avail)
	}
	mods := nettest.CongestionModules(t)
	cand := ""
	for _, cc := range []string{"vegas", "westwood", "htcp", "hybla", "illinois", "veno", "yeah", "scalable", "highspeed", "lp", "bic", "nv", "cdg", "dctcp", "bbr"} {
		if slices.Contains(mods, cc) && !slices.Contains(avail, cc) {
			cand = cc
			break
		}
	}
	if cand == "" {
		t.Logf("no module of an unloaded algorithm (modules %v, loaded %v): on-demand loading is not exercised on this kernel", mods, avail)
		return
	}
	if err := ns.h.LoadCongestionControl(cand); err != nil {
		t.Fatalf("%s, a module of this kernel: %v", cand, err)
	}
	after, err := ns.h.AvailableCongestionControls()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("loaded %s on demand: %v -> %v", cand, avail, after)
	if !slices.Contains(after, cand) {
		t.Errorf("%s not listed after loading: %v", cand, after)
	}
}
