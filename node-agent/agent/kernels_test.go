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

package agent

// What differs between the kernels the agent runs on (6.18 here; Debian's
// 5.10 and 6.1 in the kernel VMs, whose congestion controls are modules),
// asserted per what the kernel at hand shows.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/node-agent/kernel"
	"github.com/nettune/nettune/node-agent/state"
	"github.com/nettune/nettune/test/framework/nettest"
)

// TestCongestionControlLoadedOnDemand: a route asks for an algorithm the
// kernel has not loaded. Where the kernel has it as a module, the apply
// commits, the algorithm is loaded afterwards and the status lists it;
// where it has not (a kernel without modules, as here), the apply is
// refused before any change, naming the route and the algorithm and listing
// what the kernel has. Which of the two is expected is learned from the
// module files, not from the kernel's answer.
func TestCongestionControlLoadedOnDemand(t *testing.T) {
	p := newPair(t)
	before := strings.Fields(sysctlOf(t, p.A, "net.ipv4.tcp_available_congestion_control"))
	mods := nettest.CongestionModules(t)
	cand, loadable := "", false
	for _, cc := range []string{"vegas", "westwood", "htcp", "hybla", "illinois", "veno", "yeah", "scalable", "highspeed", "lp", "bic", "nv", "cdg", "dctcp", "bbr"} {
		if slices.Contains(before, cc) {
			continue
		}
		if slices.Contains(mods, cc) {
			cand, loadable = cc, true
			break
		}
		if cand == "" {
			cand = cc
		}
	}
	if cand == "" {
		t.Fatalf("every candidate algorithm is loaded already: %v", before)
	}
	t.Logf("algorithm %s: loaded %v, modules %v: loadable %v", cand, before, mods, loadable)
	features, err := p.A.h.ProbeFeatures()
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	e := newEngine(t, p.A, dir)
	dst := p.dst(50)
	prm := seed()
	cc := v1alpha1.CongestionControl(cand)
	prm.CongestionControl = &cc
	spec := v1alpha1.NodeNetTuningSpec{Revision: "r1", Routes: []v1alpha1.NodeRoute{route(dst, p.devA, prm)}}
	table := routeShow(t, p.A)
	o, err := e.Apply(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("outcome: committed %v refused %v: %s", o.Committed, o.Refused, o.Reason)
	after := strings.Fields(sysctlOf(t, p.A, "net.ipv4.tcp_available_congestion_control"))
	nnt := &v1alpha1.NodeNetTuning{Spec: spec}
	nnt.Generation = 1
	st := (&Reconciler{Engine: e, Kernel: &features}).status(nnt, o)
	if st.Kernel == nil {
		t.Fatal("status without kernel")
	}
	if loadable {
		if !o.Committed || o.Revision != "r1" {
			t.Fatalf("outcome %+v, want committed", o)
		}
		mustContain(t, "route", routeShow(t, p.A, dst), "congctl "+cand)
		if !slices.Contains(after, cand) || !slices.Contains(st.Kernel.CongestionControls, cand) {
			t.Errorf("%s after the apply: kernel lists %v, status %v", cand, after, st.Kernel.CongestionControls)
		}
		return
	}
	if !o.Refused || o.Committed || o.Revision != "" {
		t.Fatalf("outcome %+v, want refused", o)
	}
	mustContain(t, "reason", o.Reason, dst, strconv.Quote(cand), "not available", fmt.Sprint(before))
	if got := routeShow(t, p.A); got != table {
		t.Errorf("routing table changed by a refused spec:\n%s\n->\n%s", table, got)
	}
	if !slices.Equal(after, before) || slices.Contains(st.Kernel.CongestionControls, cand) {
		t.Errorf("after a refusal: kernel lists %v (was %v), status %v", after, before, st.Kernel.CongestionControls)
	}
	noJournal(t, dir)
}

// TestGlobalSysctlRefused: a spec naming net.core.rmem_max, which the
// kernel keeps once for every namespace (a non-initial namespace lacks it
// on 5.10 and 6.1, shows it read-only on 6.18), is refused before any
// change, whatever the value, with a message naming the sysctl and saying
// it is not per-namespace; the revision in force stays, and the host's
// value is untouched.
func TestGlobalSysctlRefused(t *testing.T) {
	p := newPair(t)
	dir := t.TempDir()
	e := newEngine(t, p.A, dir)
	r1 := v1alpha1.NodeNetTuningSpec{
		Revision: "r1",
		Routes:   []v1alpha1.NodeRoute{route(p.dst(60), p.devA, seed())},
		Sysctls:  []v1alpha1.Sysctl{{Name: "net.ipv4.tcp_rmem", Value: "4096 131072 8388608"}},
	}
	mustApply(t, e, r1)
	table, rmem := routeShow(t, p.A), sysctlOf(t, p.A, "net.ipv4.tcp_rmem")
	hostMax := hostSysctl(t, "net.core.rmem_max")
	n, err := strconv.Atoi(hostMax)
	if err != nil {
		t.Fatal(err)
	}
	for _, value := range []string{hostMax, strconv.Itoa(n + 4096)} {
		t.Run("value "+value, func(t *testing.T) {
			bad := v1alpha1.NodeNetTuningSpec{
				Revision: "r2",
				Routes:   []v1alpha1.NodeRoute{route(p.dst(60), p.devA, params(20, 15, 20*time.Millisecond))},
				Sysctls: []v1alpha1.Sysctl{
					{Name: "net.ipv4.tcp_rmem", Value: "4096 65536 4194304"},
					{Name: "net.core.rmem_max", Value: value},
				},
			}
			o, err := e.Apply(context.Background(), bad)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("outcome: refused %v: %s", o.Refused, o.Reason)
			if !o.Refused || o.Committed || o.RolledBack || o.Revision != "r1" {
				t.Errorf("outcome %+v, want refused with r1 in force", o)
			}
			mustContain(t, "reason", o.Reason, "refused before any change", "sysctl net.core.rmem_max", "not per-namespace on this kernel")
			if got := routeShow(t, p.A); got != table {
				t.Errorf("routing table changed by a refused spec:\n%s\n->\n%s", table, got)
			}
			if got := sysctlOf(t, p.A, "net.ipv4.tcp_rmem"); got != rmem {
				t.Errorf("tcp_rmem changed by a refused spec: %q -> %q", rmem, got)
			}
			if got := hostSysctl(t, "net.core.rmem_max"); got != hostMax {
				t.Errorf("host rmem_max changed: %q -> %q", hostMax, got)
			}
			noJournal(t, dir)
			if rev := lkgRevision(t, dir); rev != "r1" {
				t.Errorf("last-known-good %q, want r1", rev)
			}
		})
	}
}

// TestProbeWaitsForLink: the post-apply probe judges a link once it passes
// traffic or LinkWait has gone by, not on its first read: a link that comes
// back within the wait (a NIC reset by an MTU change; an operational state
// that follows the carrier late, as on 5.10 and 6.1) does not roll a good
// apply back, and one that stays down does.
func TestProbeWaitsForLink(t *testing.T) {
	p := newPair(t)
	dir := t.TempDir()
	e := newEngine(t, p.A, dir)
	peerDown := func() {
		t.Helper()
		nettest.IP(t, "-n", p.B.name, "link", "set", p.devB, "down")
		nettest.WaitFor(t, 10*time.Second, func() error {
			st, err := p.A.h.ReadInterface(p.devA)
			if err != nil || st.Carrier {
				return fmt.Errorf("%s: %+v, %v", p.devA, st, err)
			}
			return nil
		})
	}

	peerDown()
	back := make(chan error, 1)
	go func() {
		time.Sleep(time.Second)
		_, err := nettest.IPTry("-n", p.B.name, "link", "set", p.devB, "up")
		back <- err
	}()
	r1 := v1alpha1.NodeNetTuningSpec{Revision: "r1", Routes: []v1alpha1.NodeRoute{route(p.dst(70), p.devA, seed())}}
	o, err := e.Apply(context.Background(), r1)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-back; err != nil {
		t.Fatal(err)
	}
	t.Logf("link back after 1s: committed %v in %s: %s", o.Committed, o.Duration, o.Reason)
	if !o.Committed || o.Revision != "r1" {
		t.Fatalf("outcome %+v, want committed once the link came back", o)
	}
	if o.Duration < 900*time.Millisecond {
		t.Errorf("committed in %s, before the link came back", o.Duration)
	}

	e.Probes = LocalProber{Window: 50 * time.Millisecond, ConnectTimeout: 500 * time.Millisecond, LinkWait: 300 * time.Millisecond}
	peerDown()
	r2 := v1alpha1.NodeNetTuningSpec{Revision: "r2", Routes: []v1alpha1.NodeRoute{route(p.dst(70), p.devA, params(20, 15, 20*time.Millisecond))}}
	o, err = e.Apply(context.Background(), r2)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("link down throughout: rolled back %v in %s: %s", o.RolledBack, o.Duration, o.Reason)
	if !o.RolledBack || o.Committed || o.Revision != "r1" {
		t.Fatalf("outcome %+v, want rolled back to r1", o)
	}
	mustContain(t, "reason", o.Reason, "link "+p.devA+" is down")
	mustContain(t, "route after rollback", routeShow(t, p.A, p.dst(70)), "cwnd lock 30")
}

// TestStatusCarriesKernel: every status the reconciler builds, whatever
// the outcome, reports the kernel features probed at start-up, with the
// congestion controls loaded now.
func TestStatusCarriesKernel(t *testing.T) {
	ns := newNS(t)
	st, err := state.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := &Engine{Host: ns.h, Store: st, Log: testLogger(t, nil)}
	probed := kernel.Features{Release: "4.9.337-tegra", Machine: "aarch64", TCPInfoBytes: 168,
		TCPInfoCounters: kernel.TCPInfoCounters(168), CongestionControls: []string{"stale"}}
	r := &Reconciler{Engine: e, Kernel: &probed}
	now, err := ns.h.AvailableCongestionControls()
	if err != nil {
		t.Fatal(err)
	}
	nnt := &v1alpha1.NodeNetTuning{Spec: v1alpha1.NodeNetTuningSpec{Revision: "r2"}}
	for _, o := range []Outcome{
		{Revision: "r2", Committed: true},
		{Revision: "r1", Refused: true, Reason: "refused"},
		{Revision: "r1", RolledBack: true, Reason: "probe failed"},
		{Revision: "r1", Retry: RetryAfter, RetryReason: v1alpha1.ReasonInterrupted},
	} {
		k := r.status(nnt, o).Kernel
		if k == nil || k.Release != probed.Release || k.Machine != probed.Machine ||
			!slices.Equal(k.TCPInfoCounters, []string{v1alpha1.CounterTotalRetrans, v1alpha1.CounterSegsOut}) ||
			!slices.Equal(k.CongestionControls, now) {
			t.Errorf("outcome %+v: status.kernel %+v, want the probed features with congestion controls %v", o, k, now)
		}
	}
	if (&Reconciler{Engine: e}).status(nnt, Outcome{Committed: true}).Kernel != nil {
		t.Error("status.kernel set without a probe")
	}
}
