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

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/test/framework/nettest"
)

// capNetAdmin is CAP_NET_ADMIN's bit in /proc/PID/status CapEff.
const capNetAdmin = "0000000000001000"

// containerScript runs the agent as the chart's DaemonSet does: in the
// node's network namespace (hostNetwork), with CAP_NET_ADMIN as its only
// capability and no way to gain more, a read-only root filesystem, /proc/sys
// read-only (as container runtimes mount it), the host's /proc/sys/net
// mounted writable at <sysroot>/net and the state directory writable (the
// hostPath volumes). It runs inside `ip netns exec`, whose private mount
// namespace keeps all of this from the rest of the machine.
const containerScript = `set -e
mount --bind "$WORK" "$WORK"
mount --bind /proc/sys/net "$SYSROOT/net"
mount --bind /proc/sys /proc/sys
mount -o remount,bind,ro /proc/sys
mount -o remount,bind,ro /
touch /nettune-rootfs-probe 2>/dev/null && { echo "root filesystem is writable"; exit 97; }
exec setpriv --inh-caps=-all --ambient-caps=-all --bounding-set=-all,+net_admin --no-new-privs -- "$@"
`

// TestLeastPrivilege proves the agent needs nothing beyond the DaemonSet's
// security context to apply a whole node state (routes with every TCP
// parameter, a sysctl, MTU and an offload), to report it and to revert it;
// and that the read-only /proc/sys is real: without --sysctl-root the same
// apply is refused before anything is touched.
func TestLeastPrivilege(t *testing.T) {
	nettest.RequireRoot(t)
	for _, tool := range []string{"setpriv", "mount"} {
		if _, err := os.Stat("/usr/bin/" + tool); err != nil {
			t.Skipf("%s (util-linux) not found", tool)
		}
	}
	bin := buildAgent(t)
	p := newPair(t)
	work := t.TempDir()
	sysroot := filepath.Join(work, "proc-sys")
	state := filepath.Join(work, "state")
	for _, d := range []string{filepath.Join(sysroot, "net"), state} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// The binary must be reachable inside the read-only root: it is, under
	// the test's temporary directory, which is read-only there too.
	container := func(args ...string) result {
		t.Helper()
		env := append(agentEnv(t), "SYSROOT="+sysroot, "WORK="+work)
		argv := append([]string{"ip", "netns", "exec", p.A, "sh", "-c", containerScript, "container"}, args...)
		return runCLI(t, env, argv...)
	}

	// What the process really holds.
	r := container("grep", "^CapEff:", "/proc/self/status")
	if r.code != 0 || !strings.Contains(r.stdout, capNetAdmin) {
		t.Fatalf("container capabilities: exit %d, %q %s (want CapEff %s)", r.code, r.stdout, r.stderr, capNetAdmin)
	}
	r = container("sh", "-c", "echo 1 > /proc/sys/net/ipv4/tcp_no_metrics_save")
	if r.code == 0 {
		t.Fatalf("/proc/sys is writable inside the emulated container; the test would prove nothing")
	}

	hosts := p.hosts(3)
	prm := params(30, 25, 10*time.Millisecond)
	spec := p.spec("lp-1", hosts, prm, r1Rmem)
	mtu := int32(1400)
	spec.Interfaces = []v1alpha1.InterfaceTuning{{Name: p.devA, MTU: &mtu, GRO: bptr(false)}}
	file := writeSpec(t, spec, true)
	rmemBefore := sysctlOf(t, p.A, "net.ipv4.tcp_rmem")
	routesBefore := nettest.IP(t, "-n", p.A, "route", "show")

	// Without --sysctl-root: /proc/sys is read-only, preflight refuses and
	// nothing changes.
	r = container(bin, "apply", "-f", file, "--state-dir", state)
	if r.code == 0 {
		t.Fatalf("apply with a read-only /proc/sys succeeded:\n%s\n%s", r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "refused before any change") || !strings.Contains(r.stderr, "net.ipv4.tcp_rmem is not writable") {
		t.Fatalf("want a refusal naming the read-only sysctl, got: %s", r.stderr)
	}
	t.Logf("refused as expected: %s", strings.TrimSpace(r.stderr))
	if got := nettest.IP(t, "-n", p.A, "route", "show"); got != routesBefore {
		t.Fatalf("a refused apply changed routes:\nbefore %s\nafter  %s", routesBefore, got)
	}
	if got := sysctlOf(t, p.A, "net.ipv4.tcp_rmem"); got != rmemBefore {
		t.Fatalf("a refused apply changed tcp_rmem: %q -> %q", rmemBefore, got)
	}

	// With the DaemonSet's --sysctl-root: applied and verified.
	r = container(bin, "apply", "-f", file, "--state-dir", state, "--sysctl-root", sysroot)
	if r.code != 0 {
		t.Fatalf("apply with CAP_NET_ADMIN only: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	t.Logf("apply as the DaemonSet:\n%s", r.stdout)
	assertAll(t, p.A, hosts, "r1", r1Rmem, "after the least-privilege apply")
	if link := nettest.IP(t, "-n", p.A, "link", "show", p.devA); !strings.Contains(link, "mtu 1400") {
		t.Fatalf("MTU not applied: %s", link)
	}
	if got := lkgRevision(t, state); got != "lp-1" {
		t.Fatalf("last-known-good revision %q, want lp-1", got)
	}

	// diff (read-only use) and boot from last-known-good work the same way.
	r = container(bin, "diff", "-f", file, "--state-dir", state, "--sysctl-root", sysroot)
	if r.code != 0 || !strings.Contains(r.stdout, "no changes") {
		t.Fatalf("diff after apply: exit %d %s %s", r.code, r.stdout, r.stderr)
	}
	nettest.IP(t, "-n", p.A, "route", "replace", hosts[0]+"/32", "dev", p.devA)
	r = container(bin, "boot", "--state-dir", state, "--sysctl-root", sysroot)
	if r.code != 0 {
		t.Fatalf("boot with CAP_NET_ADMIN only: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	assertAll(t, p.A, hosts, "r1", r1Rmem, "after boot repaired a hand-reset route")
}
