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
	"io/fs"
	"net"
	"os"
	"strings"
	"testing"
)

// hostHandle is a Handle on the test process's own namespace, used only to
// read sysctls and prove the tests did not change them.
func hostHandle(t *testing.T) *Handle {
	t.Helper()
	h, err := NewHandle()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// TestSysctlReadWriteInNamespace writes per-namespace sysctls in one test
// namespace and reads them back there, while the host and another namespace
// keep their values.
func TestSysctlReadWriteInNamespace(t *testing.T) {
	a, b := newTestNS(t), newTestNS(t)
	host := hostHandle(t)

	for _, tc := range []struct{ name, value string }{
		{"net.ipv4.tcp_rmem", "4096 87380 3145728"},
		{"net.ipv4.tcp_wmem", "8192\t65536   2097152"}, // any white space is accepted and normalized
		{"net.core.somaxconn", "1234"},
		{"net.ipv4.tcp_no_metrics_save", "1"},
	} {
		hostBefore, err := host.ReadSysctl(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		otherBefore, err := b.h.ReadSysctl(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := a.h.WriteSysctl(tc.name, tc.value)
		if err != nil {
			t.Fatalf("write %s: %v", tc.name, err)
		}
		want := NormalizeSysctlValue(tc.value)
		if got != want {
			t.Errorf("%s read back %q, want %q", tc.name, got, want)
		}
		if again, err := a.h.ReadSysctl(tc.name); err != nil || again != want {
			t.Errorf("%s = %q, %v", tc.name, again, err)
		}
		if v, _ := host.ReadSysctl(tc.name); v != hostBefore {
			t.Errorf("host %s changed: %q -> %q", tc.name, hostBefore, v)
		}
		if v, _ := b.h.ReadSysctl(tc.name); v != otherBefore {
			t.Errorf("other namespace %s changed: %q -> %q", tc.name, otherBefore, v)
		}
	}

	// The kernel prints tcp_rmem with tabs; ReadSysctl normalizes.
	if err := a.h.Do(func() error {
		raw, err := os.ReadFile("/proc/sys/net/ipv4/tcp_rmem")
		if err != nil {
			return err
		}
		if string(raw) != "4096\t87380\t3145728\n" {
			t.Errorf("raw tcp_rmem %q", raw)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// Refusals.
	if _, err := a.h.WriteSysctl("net.core.somaxconn", "many"); err == nil {
		t.Error("non-numeric somaxconn accepted")
	}
	// A name no kernel has: a kernel with modules would load vegas.
	if _, err := a.h.WriteSysctl("net.ipv4.tcp_congestion_control", "nosuch"); err == nil {
		t.Error("unavailable congestion control accepted")
	}
	if _, err := a.h.ReadSysctl("net.ipv4.no_such_thing"); err == nil {
		t.Error("missing sysctl read")
	}
	if _, err := a.h.WriteSysctl("net.core.somaxconn", "1\n2"); err == nil {
		t.Error("value with newline accepted")
	}
}

// TestGlobalSysctlsInNamespace: net.core.rmem_max, wmem_max, rmem_default
// and wmem_default are kept once for every namespace. A non-initial
// namespace lacks them (5.10, 6.1) or shows the host's values read-only
// (6.18); the test says which this kernel does, and either way
// CheckSysctlWritable refuses them in the namespace as not per-namespace,
// naming them, while the host has them writable. Nothing is written.
func TestGlobalSysctlsInNamespace(t *testing.T) {
	a := newTestNS(t)
	host := hostHandle(t)
	for _, name := range []string{"net.core.rmem_max", "net.core.wmem_max", "net.core.rmem_default", "net.core.wmem_default"} {
		hv, err := host.ReadSysctl(name)
		if err != nil {
			t.Fatalf("host: %v", err)
		}
		path, _ := SysctlPath(name)
		var fi os.FileInfo
		var statErr error
		if err := a.h.Do(func() error {
			fi, statErr = os.Stat(path)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		switch {
		case errors.Is(statErr, fs.ErrNotExist):
			t.Logf("%s: absent in a non-initial namespace on this kernel", name)
			if v, err := a.h.ReadSysctl(name); err == nil {
				t.Errorf("%s read in the namespace (%q) though stat found no file", name, v)
			}
		case statErr != nil:
			t.Fatalf("%s in the namespace: %v", name, statErr)
		default:
			t.Logf("%s: in a non-initial namespace with mode %v on this kernel", name, fi.Mode().Perm())
			if fi.Mode().Perm()&0o222 != 0 {
				t.Errorf("%s is writable (%v) in a namespace: it may be per-namespace on this kernel", name, fi.Mode().Perm())
			}
			if nsv, err := a.h.ReadSysctl(name); err != nil || nsv != hv {
				t.Errorf("%s: namespace %q (%v), host %q", name, nsv, err, hv)
			}
		}
		err = a.h.CheckSysctlWritable(name)
		t.Logf("check in the namespace: %v", err)
		if !errors.Is(err, ErrNotPerNamespace) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "not per-namespace on this kernel") {
			t.Errorf("%s in the namespace: %v, want it refused as not per-namespace, by name", name, err)
		}
		if err := host.CheckSysctlWritable(name); err != nil {
			t.Errorf("%s on the host: %v", name, err)
		}
		if v, _ := host.ReadSysctl(name); v != hv {
			t.Errorf("host %s changed: %q -> %q", name, hv, v)
		}
	}

	// Not taken for global: a per-namespace sysctl, one this kernel lacks,
	// one of a device only the host has.
	if err := a.h.CheckSysctlWritable("net.core.somaxconn"); err != nil {
		t.Errorf("somaxconn in the namespace: %v", err)
	}
	if err := a.h.CheckSysctlWritable("net.core.no_such_thing"); err == nil || errors.Is(err, ErrNotPerNamespace) {
		t.Errorf("missing sysctl: %v, want an error other than not per-namespace", err)
	}
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		if i.Name == "lo" || strings.ContainsAny(i.Name, ".") {
			continue
		}
		name := "net.ipv4.conf." + i.Name + ".rp_filter"
		if err := a.h.CheckSysctlWritable(name); err == nil || errors.Is(err, ErrNotPerNamespace) {
			t.Errorf("%s (a device the namespace lacks): %v, want an error other than not per-namespace", name, err)
		}
		break
	}
	if _, err := a.h.ReadSysctl("net.core.netdev_max_backlog"); err == nil {
		t.Log("net.core.netdev_max_backlog is visible in a namespace on this kernel")
	}
}

func TestSsthreshEffective(t *testing.T) {
	a := newTestNS(t)
	if _, err := a.h.WriteSysctl("net.ipv4.tcp_no_ssthresh_metrics_save", "1"); err != nil {
		t.Fatal(err)
	}
	if eff, err := a.h.SsthreshEffective(); err != nil || eff {
		t.Errorf("with tcp_no_ssthresh_metrics_save=1: %v, %v", eff, err)
	}
	if _, err := a.h.WriteSysctl("net.ipv4.tcp_no_ssthresh_metrics_save", "0"); err != nil {
		t.Fatal(err)
	}
	if eff, err := a.h.SsthreshEffective(); err != nil || !eff {
		t.Errorf("with tcp_no_ssthresh_metrics_save=0: %v, %v", eff, err)
	}
	cc, err := a.h.AvailableCongestionControls()
	if err != nil || len(cc) == 0 {
		t.Fatalf("available congestion controls: %v, %v", cc, err)
	}
	t.Logf("available congestion controls: %v", cc)

	// A kernel without the sysctl (4.9) always uses the route's ssthresh:
	// seen through a sysctl root that lacks it.
	root := t.TempDir()
	if err := os.MkdirAll(root+"/net/ipv4", 0o755); err != nil {
		t.Fatal(err)
	}
	a.h.SysctlRoot = root
	if eff, err := a.h.SsthreshEffective(); err != nil || !eff {
		t.Errorf("without tcp_no_ssthresh_metrics_save: %v, %v", eff, err)
	}
}
