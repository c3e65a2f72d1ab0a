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

package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nettune/nettune/api/v1alpha1"
	"github.com/nettune/nettune/controllers/fleetmodel"
	"github.com/nettune/nettune/internal/fleet"
)

func ptr[T any](v T) *T { return &v }

// spec is a profile whose every route (to each peer host, and to two WAN
// prefixes) gets cwnd 40 locked and ssthresh: the ssthresh marks the
// revision in the kernel, four routes per host.
func spec(ssthresh int32, rollout *v1alpha1.RolloutSpec) v1alpha1.NetTuningProfileSpec {
	params := v1alpha1.TCPParameters{Cwnd: &v1alpha1.Cwnd{Value: 40, Lock: ptr(true)}, Ssthresh: ptr(ssthresh)}
	return v1alpha1.NetTuningProfileSpec{
		NodeSelector: &v1alpha1.LabelSelector{MatchLabels: map[string]v1alpha1.LabelValue{v1alpha1.DefaultHardwareLabel: "xavier"}},
		Defaults:     params.DeepCopy(),
		Routes: []v1alpha1.ProfileRoute{
			{Name: "depot", Destination: "10.200.0.0/16", Device: ptr("lan0"), Parameters: params},
			{Name: "map-server", Destination: "10.201.0.0/16", Device: ptr("lan0"), Parameters: params},
		},
		Rollout: rollout,
	}
}

// routesPerHost is what spec renders on each host: two peers, two prefixes.
const routesPerHost = 4

// allAtOnce is no rollout: every vehicle gets a new revision at once.
func allAtOnce() *v1alpha1.RolloutSpec { return nil }

// staged is a rollout from the canary vehicles through steps.
func staged(canary []string, steps ...v1alpha1.RolloutStep) *v1alpha1.RolloutSpec {
	return &v1alpha1.RolloutSpec{
		Canary:           v1alpha1.CanarySpec{Vehicles: canary},
		Steps:            steps,
		UnreachableAfter: &metav1.Duration{Duration: 15 * time.Second},
	}
}

func toFleet() v1alpha1.RolloutStep {
	return v1alpha1.RolloutStep{SetVehicles: &v1alpha1.SetVehiclesStep{Percent: ptr(int32(100))}}
}

func getProfile(t *testing.T, name string) *v1alpha1.NetTuningProfile {
	t.Helper()
	p := &v1alpha1.NetTuningProfile{}
	if err := f.CP.Client.Get(context.Background(), client.ObjectKey{Name: name}, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// put creates the profile, or replaces its spec as `kubectl apply` would.
func put(t *testing.T, name string, s v1alpha1.NetTuningProfileSpec) {
	t.Helper()
	ctx := context.Background()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := &v1alpha1.NetTuningProfile{}
		err := f.CP.Client.Get(ctx, client.ObjectKey{Name: name}, p)
		if apierrors.IsNotFound(err) {
			p = &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: s}
			return f.CP.Client.Create(ctx, p)
		}
		if err != nil {
			return err
		}
		p.Spec = s
		return f.CP.Client.Update(ctx, p)
	})
	if err != nil {
		t.Fatalf("applying profile %s: %v", name, err)
	}
}

// remove deletes the profile when the test ends and waits until no node
// carries it, so the next test starts from untuned hosts.
func remove(t *testing.T, name string) {
	t.Cleanup(func() {
		ctx := context.Background()
		p := &v1alpha1.NetTuningProfile{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := f.CP.Client.Delete(ctx, p); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting profile %s: %v", name, err)
			return
		}
		waitFor(t, 2*time.Minute, "no node carries "+name, func() bool {
			for _, n := range nodes(t) {
				if fleetmodel.AssignedRevision(&n, name) != "" {
					return false
				}
				if ok, _, _ := fleetmodel.NodeReport(&n); !ok {
					return false
				}
			}
			return true
		})
	})
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	began := time.Now()
	for !cond() {
		if time.Since(began) > timeout {
			t.Fatalf("timed out after %s waiting for %s\n%s", timeout, what, f.Evidence(context.Background()))
		}
		time.Sleep(250 * time.Millisecond)
	}
	return time.Since(began)
}

func waitProfile(t *testing.T, name string, timeout time.Duration, what string, cond func(*v1alpha1.NetTuningProfile) bool) *v1alpha1.NetTuningProfile {
	t.Helper()
	var p *v1alpha1.NetTuningProfile
	waitFor(t, timeout, name+": "+what, func() bool {
		p = getProfile(t, name)
		return cond(p)
	})
	return p
}

// nodes lists the NodeNetTunings, failing the test on an error.
func nodes(t *testing.T) []v1alpha1.NodeNetTuning {
	t.Helper()
	list := &v1alpha1.NodeNetTuningList{}
	if err := f.CP.Client.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// healthy waits until the profile is Healthy on a stable revision for its
// current spec and returns that revision.
func healthy(t *testing.T, name string, timeout time.Duration) string {
	t.Helper()
	p := waitProfile(t, name, timeout, "Healthy", func(p *v1alpha1.NetTuningProfile) bool {
		return p.Status.ObservedGeneration == p.Generation && p.Status.Phase == v1alpha1.PhaseHealthy &&
			p.Status.StableRevision != "" && p.Status.StableRevision == p.Status.CurrentRevision
	})
	return p.Status.StableRevision
}

// converged: every node is assigned rev of profile, its agent verified it,
// and its kernel routes carry the revision's ssthresh.
func converged(t *testing.T, profile, rev string, ssthresh int32) bool {
	t.Helper()
	ns := nodes(t)
	if len(ns) != len(vehicles)*len(hosts) {
		return false
	}
	for i := range ns {
		ok, _, _ := fleetmodel.NodeReport(&ns[i])
		if !ok || fleetmodel.AssignedRevision(&ns[i], profile) != rev {
			return false
		}
	}
	want := fmt.Sprintf("ssthresh lock %d", ssthresh)
	for _, v := range vehicles {
		for _, h := range hosts {
			rs, err := kernelRoutes(v, h)
			if err != nil || len(rs) != routesPerHost {
				return false
			}
			for _, sig := range rs {
				if !strings.Contains(sig, want) {
					return false
				}
			}
		}
	}
	return true
}

// vehicleVerified: every node of the vehicle is assigned rev of profile and
// its agent verified (committed) it.
func vehicleVerified(t *testing.T, vehicle, profile, rev string) bool {
	t.Helper()
	ok, err := f.VehicleVerified(context.Background(), vehicle, profile, rev)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// hostsOn is how many of the vehicle's hosts carry ssthresh in the kernel.
func hostsOn(t *testing.T, vehicle string, ssthresh int32) int {
	t.Helper()
	n := 0
	for _, h := range hosts {
		rs, err := kernelRoutes(vehicle, h)
		if err != nil {
			t.Fatal(err)
		}
		all := len(rs) == routesPerHost
		for _, sig := range rs {
			all = all && strings.Contains(sig, fmt.Sprintf("ssthresh lock %d", ssthresh))
		}
		if all {
			n++
		}
	}
	return n
}

var metricRE = regexp.MustCompile(`\b(cwnd|initcwnd|initrwnd|ssthresh|rto_min|quickack|congctl|advmss|mtu)( lock)? \S+`)

// kernelRoutes reads the routes nettune owns on a host (proto static):
// destination -> its TCP metrics as `ip route` prints them.
func kernelRoutes(vehicle, host string) (map[string]string, error) {
	out, err := f.Routes(vehicle, host)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: ip route: %w: %s", vehicle, host, err, out)
	}
	rs := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if !strings.Contains(line, " proto static") {
			continue
		}
		dst, _, _ := strings.Cut(line, " ")
		rs[dst] = strings.Join(metricRE.FindAllString(line, -1), " ")
	}
	return rs, nil
}

// sampler reads every host's routes over and over while a fault runs. A
// sample is taken only outside an agent transaction: no journal in the
// agent's state directory, and the directory unchanged (its mtime) from
// before the read to after it, so no apply began and ended in between. A
// host is half-applied when such a sample finds its routes carrying the
// metrics of two revisions, or a route whose metrics differ from the
// last-known-good the agent committed.
type sampler struct {
	mu         sync.Mutex
	samples    int
	skipped    int
	violations []string
	stop, done chan struct{}
}

func watchHosts(t *testing.T) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			select {
			case <-s.stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			for _, v := range vehicles {
				for _, h := range hosts {
					s.sample(v, h)
				}
			}
		}
	}()
	t.Cleanup(func() {
		s.close()
		s.mu.Lock()
		defer s.mu.Unlock()
		t.Logf("host samples: %d taken, %d skipped inside a transaction", s.samples, s.skipped)
		if s.samples == 0 {
			t.Errorf("no host sample was taken")
		}
		for i, v := range s.violations {
			if i == 10 {
				t.Errorf("... and %d more", len(s.violations)-10)
				break
			}
			t.Errorf("half-applied: %s", v)
		}
	})
	return s
}

func (s *sampler) close() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

// quiet returns the state directory's mtime, false when a journal is
// pending or the directory cannot be read.
func quiet(dir string) (time.Time, bool) {
	st, err := os.Stat(dir)
	if err != nil {
		return time.Time{}, false
	}
	if _, err := os.Stat(filepath.Join(dir, "journal.json")); !errors.Is(err, fs.ErrNotExist) {
		return time.Time{}, false
	}
	return st.ModTime(), true
}

// committedMetrics reads the agent's last-known-good spec: destination ->
// ssthresh (nil when unreadable).
func committedMetrics(dir string) map[string]int32 {
	data, err := os.ReadFile(filepath.Join(dir, "last-known-good.json"))
	if err != nil {
		return nil
	}
	var lkg struct {
		Spec v1alpha1.NodeNetTuningSpec `json:"spec"`
	}
	if json.Unmarshal(data, &lkg) != nil {
		return nil
	}
	out := map[string]int32{}
	for _, r := range lkg.Spec.Routes {
		if r.Parameters.Ssthresh != nil {
			out[r.Destination] = *r.Parameters.Ssthresh
		}
	}
	return out
}

func (s *sampler) sample(vehicle, host string) {
	dir := f.AgentStateDir(fleet.NodeName(vehicle, host))
	before, ok := quiet(dir)
	if !ok {
		s.count(false, "")
		return
	}
	lkg := committedMetrics(dir)
	rs, err := kernelRoutes(vehicle, host)
	after, ok := quiet(dir)
	if err != nil || !ok || !after.Equal(before) {
		s.count(false, "")
		return
	}
	sigs := map[string]bool{}
	var bad []string
	for dst, sig := range rs {
		sigs[sig] = true
		want, known := lkg[dst]
		if !known {
			want, known = lkg[dst+"/32"]
		}
		if lkg != nil && (!known || !strings.Contains(sig, fmt.Sprintf("ssthresh lock %d", want))) {
			bad = append(bad, fmt.Sprintf("%s %q (last-known-good: ssthresh %d, known %v)", dst, sig, want, known))
		}
	}
	var msg string
	switch {
	case len(sigs) > 1:
		msg = fmt.Sprintf("%s/%s at %s: routes on %d revisions: %v", vehicle, host, time.Now().Format("15:04:05.000"), len(sigs), rs)
	case len(bad) > 0:
		sort.Strings(bad)
		msg = fmt.Sprintf("%s/%s at %s: kernel differs from the committed state: %s", vehicle, host, time.Now().Format("15:04:05.000"), strings.Join(bad, "; "))
	}
	s.count(true, msg)
}

func (s *sampler) count(taken bool, violation string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !taken {
		s.skipped++
		return
	}
	s.samples++
	if violation != "" {
		s.violations = append(s.violations, violation)
	}
}

func round(d time.Duration) string { return d.Round(100 * time.Millisecond).String() }
