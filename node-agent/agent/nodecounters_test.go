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

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/node-agent/kernel"
	"github.com/nettune/nettune/node-agent/state"
	"github.com/nettune/nettune/test/framework/nettest"
)

// tcpExtOf reads TcpExt of ns's /proc/net/netstat on a thread inside it,
// parsed here (not by the kernel package) as a cross-check.
func tcpExtOf(t *testing.T, ns *testNS) map[string]uint64 {
	t.Helper()
	var b []byte
	if err := kernel.DoInNetns(ns.h.Namespace(), func() error {
		var err error
		b, err = os.ReadFile("/proc/thread-self/net/netstat")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	out := map[string]uint64{}
	for i := 0; i+1 < len(lines); i += 2 {
		names, vals := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if names[0] != "TcpExt:" {
			continue
		}
		for j := 1; j < len(names) && j < len(vals); j++ {
			v, err := strconv.ParseUint(vals[j], 10, 64)
			if err != nil {
				t.Fatalf("TcpExt %s: %v", names[j], err)
			}
			out[names[j]] = v
		}
	}
	if len(out) == 0 {
		t.Fatalf("no TcpExt in %s's /proc/net/netstat", ns.name)
	}
	return out
}

// TestNodeCounters: the agent exports the node-level TcpExt counters of its
// namespace as nettune_node_tcpext_*_total, one series per node, with
// /proc's values, before any commit too; they follow a real timeout (the
// peer's link goes down under a sending connection: a tail loss probe, then
// RTOs); and the status reports which the kernel has, with their meaning.
func TestNodeCounters(t *testing.T) {
	p := newPair(t)
	sink := listenIn(t, p.B, p.addrB)
	st, err := state.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	e := &Engine{Host: p.A.h, Store: st}
	NewMetricsFor(reg, MetricLabels{Node: "av-001-xavier-a", Vehicle: "av-001", Host: "xavier-a"}, e)
	labels := `host="xavier-a",node="av-001-xavier-a",vehicle="av-001"`
	scrape := func(d kernel.NodeCounterDef) (uint64, bool) {
		t.Helper()
		got := gatherSeries(t, reg, d.Metric)
		if len(got) == 0 {
			return 0, false
		}
		if len(got) != 1 || !strings.HasPrefix(got[0], labels+" ") {
			t.Fatalf("%s: %v, want one series {%s}", d.Metric, got, labels)
		}
		v, err := strconv.ParseFloat(strings.TrimPrefix(got[0], labels+" "), 64)
		if err != nil {
			t.Fatal(err)
		}
		return uint64(v), true
	}

	// Every counter the namespace has is exported, with its value (the
	// scrape comes after /proc is read: counters only grow, and nothing
	// runs in the namespace yet).
	proc := tcpExtOf(t, p.A)
	for _, d := range kernel.NodeCounterDefs {
		v, ok := scrape(d)
		pv, has := proc[d.Name]
		t.Logf("%s (%s): exported %v %d, /proc %v %d", d.Metric, d.Name, ok, v, has, pv)
		if ok != has || v < pv {
			t.Errorf("%s: exported %v %d, /proc has %v %d", d.Metric, ok, v, has, pv)
		}
	}

	// A timeout: the peer's link goes down while A sends.
	c := dialFrom(t, p.A, p.addrB, sink.port())
	sendAcked(t, c, 64<<10)
	timeouts, probes := kernel.NodeCounterDefs[0], kernel.NodeCounterDefs[2]
	if timeouts.Name != v1alpha1.NodeCounterTimeouts || probes.Name != v1alpha1.NodeCounterLossProbes {
		t.Fatalf("NodeCounterDefs order changed: %v", kernel.NodeCounterDefs)
	}
	t0, ok0 := scrape(timeouts)
	l0, _ := scrape(probes)
	if !ok0 {
		t.Skip("the kernel has no TcpExt TCPTimeouts")
	}
	nettest.IP(t, "-n", p.B.name, "link", "set", p.devB, "down")
	if err := c.SetWriteDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	nettest.WaitFor(t, 15*time.Second, func() error {
		t1, _ := scrape(timeouts)
		l1, _ := scrape(probes)
		if t1 <= t0 {
			return fmt.Errorf("%s %d -> %d, %s %d -> %d: no timeout yet", timeouts.Metric, t0, t1, probes.Metric, l0, l1)
		}
		t.Logf("after the peer's link went down: %s %d -> %d, %s %d -> %d", timeouts.Metric, t0, t1, probes.Metric, l0, l1)
		return nil
	})

	// The probe reports the same counters; the status carries them.
	f, err := p.A.h.ProbeFeatures()
	if err != nil {
		t.Fatal(err)
	}
	st2 := (&Reconciler{Engine: e, Kernel: &f}).status(&v1alpha1.NodeNetTuning{}, Outcome{}).Kernel
	if st2 == nil {
		t.Fatal("status without kernel")
	}
	var names []string
	for _, nc := range st2.NodeCounters {
		names = append(names, nc.Name)
		if nc.Meaning == "" {
			t.Errorf("node counter %s without a meaning", nc.Name)
		}
	}
	t.Logf("status.kernel.nodeCounters: %+v", st2.NodeCounters)
	for _, d := range kernel.NodeCounterDefs {
		if _, has := proc[d.Name]; has != slices.Contains(names, d.Name) || has != st2.ProvidesNodeCounter(d.Name) {
			t.Errorf("%s: in /proc %v, in status %v", d.Name, has, names)
		}
	}
}
