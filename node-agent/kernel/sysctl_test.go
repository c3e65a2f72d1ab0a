package kernel

import (
	"os"
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
	if _, err := a.h.WriteSysctl("net.ipv4.tcp_congestion_control", "vegas"); err == nil {
		t.Error("unavailable congestion control accepted")
	}
	if _, err := a.h.ReadSysctl("net.ipv4.no_such_thing"); err == nil {
		t.Error("missing sysctl read")
	}
	if _, err := a.h.WriteSysctl("net.core.somaxconn", "1\n2"); err == nil {
		t.Error("value with newline accepted")
	}
}

// TestGlobalSysctlsInNamespace documents which sysctls are not per
// namespace: net.core.rmem_max & co are read-only mirrors of the host's
// values in a non-initial namespace (checked by mode, nothing is written).
func TestGlobalSysctlsInNamespace(t *testing.T) {
	a := newTestNS(t)
	host := hostHandle(t)
	for _, name := range []string{"net.core.rmem_max", "net.core.wmem_max", "net.core.rmem_default", "net.core.wmem_default"} {
		path, _ := SysctlPath(name)
		var mode os.FileMode
		if err := a.h.Do(func() error {
			fi, err := os.Stat(path)
			if err == nil {
				mode = fi.Mode().Perm()
			}
			return err
		}); err != nil {
			t.Fatalf("%s in namespace: %v", name, err)
		}
		if mode&0o222 != 0 {
			t.Errorf("%s is writable (%v) in a namespace: it may be per-namespace on this kernel", name, mode)
		}
		nsv, err := a.h.ReadSysctl(name)
		if err != nil {
			t.Fatal(err)
		}
		hv, err := host.ReadSysctl(name)
		if err != nil {
			t.Fatal(err)
		}
		if nsv != hv {
			t.Errorf("%s: namespace %q, host %q", name, nsv, hv)
		}
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
}
