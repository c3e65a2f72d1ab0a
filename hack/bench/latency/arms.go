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
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/render"
	"github.com/nettune/nettune/controllers/revision"
	"github.com/nettune/nettune/internal/vehiclesim"
)

// arm is one configuration under test.
type arm struct {
	Name    string // defaults, v2, v1
	Title   string // for the report
	File    string // sample profile ("" = kernel defaults: no profile)
	Profile *v1alpha1.NetTuningProfile
	// Revision is the revision name the profile is rendered under.
	Revision string
}

// loadArms reads the sample profiles of the named arms.
func loadArms(dir string, names []string) ([]*arm, error) {
	var out []*arm
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			return nil, fmt.Errorf("arm %q given twice", n)
		}
		seen[n] = true
		a := &arm{Name: n}
		switch n {
		case "defaults":
			a.Title = "kernel defaults"
		case "v2":
			a.Title = "v2 (shipped: cwnd 30 locked, initcwnd/initrwnd 25, ssthresh 30, rto_min 10ms, quickack)"
			a.File = filepath.Join(dir, "xavier-lan-v2.yaml")
		case "v1":
			a.Title = "v1 (earlier: cwnd 40 locked, initcwnd/initrwnd 30, ssthresh 40, rto_min 10ms, quickack)"
			a.File = filepath.Join(dir, "xavier-lan-v1.yaml")
		case "recommended":
			// Derived from the testbed under load before the rounds
			// (bench.recommendArm); a placeholder until then.
			a.Title = "recommended"
		default:
			return nil, fmt.Errorf("unknown arm %q (defaults, v2, v1, recommended)", n)
		}
		if a.File != "" {
			raw, err := os.ReadFile(a.File)
			if err != nil {
				return nil, err
			}
			var p v1alpha1.NetTuningProfile
			if err := yaml.UnmarshalStrict(raw, &p); err != nil {
				return nil, fmt.Errorf("%s: %w", a.File, err)
			}
			a.Profile = &p
			a.Revision = p.Name + "-" + revision.Hash(p.Spec)
		}
		out = append(out, a)
	}
	return out, nil
}

// Node labels of the testbed hosts, as the vehicles carry them.
const (
	hardwareValue   = "xavier"
	lanProfileLabel = "nettune.io/lan-profile" // v1's nodeSelector
)

// renderNodes renders a's spec for every host of v, the way the controller
// does: nodes carry the vehicle, host and hardware labels, Address is the
// host's LAN address and Device its LAN interface. Kernel defaults render
// with no profile input: a spec with no routes.
func renderNodes(v *vehiclesim.Vehicle, a *arm) (map[string]v1alpha1.NodeNetTuningSpec, error) {
	var nodes []render.Node
	for _, h := range v.Hosts {
		nodes = append(nodes, render.Node{
			Name: h.Name,
			Labels: map[string]string{
				v1alpha1.DefaultVehicleLabel:  v.Name,
				v1alpha1.DefaultHostLabel:     h.Name,
				v1alpha1.DefaultHardwareLabel: hardwareValue,
				lanProfileLabel:               "v1",
			},
			Address: h.Addr.String(),
			Device:  h.Dev,
		})
	}
	var inputs []render.Input
	if a.Profile != nil {
		inputs = []render.Input{{Profile: a.Profile.Name, Revision: a.Revision, Spec: &a.Profile.Spec}}
	}
	out := map[string]v1alpha1.NodeNetTuningSpec{}
	for _, n := range nodes {
		res := render.Render(n, nodes, inputs)
		if len(res.Conflicts) > 0 || len(res.Warnings) > 0 {
			return nil, fmt.Errorf("rendering %s for %s: conflicts %v, warnings %v", a.Name, n.Name, res.Conflicts, res.Warnings)
		}
		if a.Profile != nil && len(res.Spec.Routes) != len(v.Hosts)-1 {
			return nil, fmt.Errorf("rendering %s for %s: %d routes, want one per peer (%d)", a.Name, n.Name, len(res.Spec.Routes), len(v.Hosts)-1)
		}
		out[n.Name] = res.Spec
	}
	return out, nil
}

// agentRunner applies arms with the real agent CLI, one state directory per
// host, kept for the whole benchmark (so the agent restores the routes it
// created when the next arm drops them).
type agentRunner struct {
	bin      string
	dir      string // spec files and state directories
	stateDir map[string]string
}

func newAgentRunner(bin string, v *vehiclesim.Vehicle) (*agentRunner, error) {
	abs, err := filepath.Abs(bin)
	if err != nil {
		return nil, err
	}
	sweepStateDirs()
	dir, err := os.MkdirTemp("", fmt.Sprintf("bench-latency-%d-", os.Getpid()))
	if err != nil {
		return nil, err
	}
	r := &agentRunner{bin: abs, dir: dir, stateDir: map[string]string{}}
	for _, h := range v.Hosts {
		sd := filepath.Join(dir, "state-"+h.Name)
		if err := os.Mkdir(sd, 0o700); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		r.stateDir[h.Name] = sd
	}
	return r, nil
}

// sweepStateDirs removes the temp directories of earlier runs whose process
// is gone (killed before it could clean up).
func sweepStateDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "bench-latency-*-*"))
	for _, d := range dirs {
		pid, err := strconv.Atoi(strings.Split(filepath.Base(d), "-")[2])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); errors.Is(err, os.ErrNotExist) {
			os.RemoveAll(d)
		}
	}
}

// Close removes the spec files and state directories.
func (r *agentRunner) Close() error { return os.RemoveAll(r.dir) }

// applied is the evidence of one arm's application.
type applied struct {
	Revision   map[string]string // host -> revision the agent committed
	AgentOut   string            // the agent's report for the first topic sender
	Route      string            // `ip -n <sender> route` line to the receiver ("" = none)
	RouteTable string            // full `ip -n <sender> route` output
	TCPMetrics string            // `ip -n <sender> tcp_metrics show <receiver>` after the apply
	Duration   time.Duration
}

// apply makes arm a the state of every host: it flushes tcp_metrics on every
// host (no cached cwnd/RTT of an earlier arm), then runs
// `nettune-agent apply -f SPEC --netns NS --state-dir DIR` for every host in
// parallel and requires exit 0 (the agent commits only after reading every
// item back and probing the peers). Kernel defaults are the empty rendered
// spec: the agent puts every route it had tuned back to its original state
// (the /32 routes it created are deleted). It then checks `ip route` in every
// host: the tuned arms have a /32 route with the metrics to every peer, the
// defaults arm has no metrics anywhere.
func (r *agentRunner) apply(ctx context.Context, v *vehiclesim.Vehicle, a *arm, sender, receiver *vehiclesim.Host) (applied, error) {
	start := time.Now()
	res := applied{Revision: map[string]string{}}
	specs, err := renderNodes(v, a)
	if err != nil {
		return res, err
	}
	for _, h := range v.Hosts {
		if _, err := ipCmd(ctx, "-n", h.Netns, "tcp_metrics", "flush", "all"); err != nil {
			return res, err
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, len(v.Hosts))
	for i, h := range v.Hosts {
		wg.Go(func() {
			spec := specs[h.Name]
			obj := v1alpha1.NodeNetTuning{
				TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "NodeNetTuning"},
				ObjectMeta: metav1.ObjectMeta{Name: h.Name},
				Spec:       spec,
			}
			raw, err := yaml.Marshal(obj)
			if err != nil {
				errs[i] = err
				return
			}
			file := filepath.Join(r.dir, fmt.Sprintf("%s-%s.yaml", a.Name, h.Name))
			if err := os.WriteFile(file, raw, 0o600); err != nil {
				errs[i] = err
				return
			}
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(cctx, r.bin, "apply", "-f", file, "--netns", h.Netns, "--state-dir", r.stateDir[h.Name])
			out, err := cmd.CombinedOutput()
			if err != nil {
				errs[i] = fmt.Errorf("%s apply -f %s --netns %s (host %s): %w\n%s", r.bin, file, h.Netns, h.Name, err, out)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			res.Revision[h.Name] = spec.Revision
			if h == sender {
				res.AgentOut = agentReport(string(out))
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	for _, h := range v.Hosts {
		table, err := ipCmd(ctx, "-n", h.Netns, "route", "show")
		if err != nil {
			return res, err
		}
		if err := checkRoutes(a, v, h, table); err != nil {
			return res, err
		}
		if h == sender {
			res.RouteTable = table
			for _, l := range strings.Split(table, "\n") {
				if strings.HasPrefix(l, receiver.Addr.String()+" ") {
					res.Route = strings.TrimSpace(l)
				}
			}
		}
	}
	tm, err := ipCmd(ctx, "-n", sender.Netns, "tcp_metrics", "show")
	if err != nil {
		return res, err
	}
	for _, l := range strings.Split(tm, "\n") {
		if strings.HasPrefix(l, receiver.Addr.String()+" ") {
			res.TCPMetrics = strings.TrimSpace(l)
		}
	}
	res.Duration = time.Since(start)
	return res, nil
}

// agentReport keeps the agent's stdout lines (the JSON logs go to stderr,
// combined here): "applied revision ..." and the item lines.
func agentReport(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "{") || strings.TrimSpace(l) == "" {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

// checkRoutes verifies a host's route table after an arm was applied.
func checkRoutes(a *arm, v *vehiclesim.Vehicle, h *vehiclesim.Host, table string) error {
	byDst := map[string]string{}
	for _, l := range strings.Split(table, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			byDst[f[0]] = l
		}
	}
	if a.Profile == nil {
		for _, l := range byDst {
			for _, m := range []string{"rto_min", "cwnd", "initcwnd", "quickack", "ssthresh"} {
				if strings.Contains(l, m) {
					return fmt.Errorf("arm %s: host %s still has route metrics: %q", a.Name, h.Name, l)
				}
			}
		}
		for _, p := range v.Hosts {
			if _, ok := byDst[p.Addr.String()]; ok {
				return fmt.Errorf("arm %s: host %s still has a /32 route to %s", a.Name, h.Name, p.Name)
			}
		}
		return nil
	}
	// The parameters of the route to a peer: the defaults with the host
	// pairs that match (from this host or "*", to the peer or "*") over them.
	wantFor := func(peer string) []string {
		d := a.Profile.Spec.Defaults.DeepCopy()
		for _, hp := range a.Profile.Spec.HostPairs {
			if hp.Parameters != nil && (hp.From == "*" || hp.From == h.Name) && (hp.To == "*" || hp.To == peer) {
				d.Overlay(hp.Parameters)
			}
		}
		want := []string{
			fmt.Sprintf("cwnd lock %d", d.Cwnd.Value),
			fmt.Sprintf("initcwnd %d", *d.Initcwnd),
			fmt.Sprintf("initrwnd %d", *d.Initrwnd),
			fmt.Sprintf("rto_min lock %dms", d.RTOMin.Milliseconds()),
			"quickack 1",
		}
		if !d.Cwnd.IsLocked() {
			want[0] = fmt.Sprintf("cwnd %d", d.Cwnd.Value)
		}
		return want
	}
	for _, p := range v.Hosts {
		if p == h {
			continue
		}
		l, ok := byDst[p.Addr.String()]
		if !ok {
			return fmt.Errorf("arm %s: host %s has no route to %s (%s):\n%s", a.Name, h.Name, p.Name, p.Addr, table)
		}
		for _, w := range wantFor(p.Name) {
			if !strings.Contains(l, w) {
				return fmt.Errorf("arm %s: host %s route to %s lacks %q: %q", a.Name, h.Name, p.Name, w, l)
			}
		}
	}
	return nil
}

func ipCmd(ctx context.Context, args ...string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(cctx, "ip", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}
